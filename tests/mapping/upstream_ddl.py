"""The SQL Server DDL of the queue libraries that have a preset, transcribed from their upstream source
(issue 33), as the tables stand after the library's own install / migration has run.

Each entry records the repository, the file, the version (tag or ``git describe``) and the commit it
was read at (the repositories were fetched and read with ``git show <commit>:<file>``). Only the
queue table's CREATE TABLE and CREATE INDEX statements are kept, with their column types and key
order as upstream writes them; where upstream migrates an older schema (Hangfire's Install.sql
drops and re-creates keys up to schema 9), the statements are those of the final schema, each
annotated with the line it comes from. ``{schema}`` / ``{table}`` are what the library fills in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Upstream:
    library: str
    repository: str
    file: str
    version: str
    commit: str
    ddl: str  # T-SQL: CREATE TABLE and CREATE INDEX statements, ';'-separated


# Hangfire.SqlServer Install.sql, schema version 9 (@TARGET_SCHEMA_VERSION = 9). JobQueue: created
# at lines 147-153 with a clustered key on Id; schema 6 re-creates it as PRIMARY KEY CLUSTERED
# (Queue, Id) (lines 585-588) after dropping IX_HangFire_JobQueue_QueueAndFetchedAt (line 469,
# never re-created); schema 8 widens Id to bigint and re-creates the same key (lines 747-757); Queue
# is nvarchar(50) since schema 5 (line 368). State: PRIMARY KEY CLUSTERED (JobId, Id) since schema 6
# (lines 603-606); IX_HangFire_State_CreatedAt added by schema 9 (line 764). Job: clustered Id
# (line 576), IX_HangFire_Job_StateName filtered WHERE [StateName] IS NOT NULL (lines 611-612),
# IX_HangFire_Job_ExpireAt (lines 632-634).
HANGFIRE = Upstream(
    library="Hangfire", repository="HangfireIO/Hangfire", file="src/Hangfire.SqlServer/Install.sql",
    version="v1.8.24-2-gc236dd0f (schema 9)", commit="c236dd0f930f831ec151e436e138ddc429a02a72",
    ddl="""
CREATE TABLE [HangFire].[JobQueue] (
    [Id] bigint IDENTITY(1,1) NOT NULL,
    [JobId] bigint NOT NULL,
    [Queue] nvarchar(50) NOT NULL,
    [FetchedAt] datetime NULL,
    CONSTRAINT [PK_HangFire_JobQueue] PRIMARY KEY CLUSTERED ([Queue] ASC, [Id] ASC)
);
CREATE TABLE [HangFire].[State] (
    [Id] bigint IDENTITY(1,1) NOT NULL,
    [JobId] bigint NOT NULL,
    [Name] nvarchar(20) NOT NULL,
    [Reason] nvarchar(100) NULL,
    [CreatedAt] datetime NOT NULL,
    [Data] nvarchar(max) NULL,
    CONSTRAINT [PK_HangFire_State] PRIMARY KEY CLUSTERED ([JobId] ASC, [Id])
);
CREATE NONCLUSTERED INDEX [IX_HangFire_State_CreatedAt] ON [HangFire].[State] ([CreatedAt] ASC);
CREATE TABLE [HangFire].[Job] (
    [Id] bigint IDENTITY(1,1) NOT NULL,
    [StateId] bigint NULL,
    [StateName] nvarchar(20) NULL,
    [InvocationData] nvarchar(max) NOT NULL,
    [Arguments] nvarchar(max) NOT NULL,
    [CreatedAt] datetime NOT NULL,
    [ExpireAt] datetime NULL,
    CONSTRAINT [PK_HangFire_Job] PRIMARY KEY CLUSTERED ([Id] ASC)
);
CREATE NONCLUSTERED INDEX [IX_HangFire_Job_StateName] ON [HangFire].[Job] ([StateName]) WHERE [StateName] IS NOT NULL;
CREATE NONCLUSTERED INDEX [IX_HangFire_Job_ExpireAt] ON [HangFire].[Job] ([ExpireAt]) INCLUDE ([StateName])
    WHERE [ExpireAt] IS NOT NULL
""")

# MassTransit SqlServerDatabaseMigrator.cs (SQL transport, SQL Server): MessageDelivery at lines
# 277-298 (EnqueueTime datetime2 since 2024-01-08), its indexes at lines 305, 312, 319. The fetch
# (FetchMessages, lines 919-933): WHERE md.QueueId = @queueId AND md.EnqueueTime <= @now AND
# md.DeliveryCount < md.MaxDeliveryCount ORDER BY Priority, EnqueueTime, MessageDeliveryId, with
# (ROWLOCK, READPAST, UPDLOCK). The REFERENCES to Message is left out (no index of its own).
MASSTRANSIT = Upstream(
    library="MassTransit", repository="MassTransit/MassTransit",
    file="src/Transports/MassTransit.SqlTransport.SqlServer/SqlTransport/SqlServer/SqlServerDatabaseMigrator.cs",
    version="v8.5.8", commit="c1e5caa9a49ba4e56dbad6ed1b9c8f7843a9dba5",
    ddl="""
CREATE TABLE [transport].[MessageDelivery] (
    MessageDeliveryId bigint NOT NULL PRIMARY KEY,
    TransportMessageId uniqueidentifier NOT NULL,
    QueueId bigint NOT NULL,
    Priority smallint NOT NULL,
    EnqueueTime datetime2 NOT NULL,
    ExpirationTime datetime2,
    PartitionKey nvarchar(128),
    RoutingKey nvarchar(256),
    ConsumerId uniqueidentifier,
    LockId uniqueidentifier,
    DeliveryCount int NOT NULL,
    MaxDeliveryCount int NOT NULL,
    LastDelivered datetime2,
    TransportHeaders nvarchar(max)
);
CREATE INDEX IX_MessageDelivery_Fetch ON [transport].[MessageDelivery] (QueueId, Priority, EnqueueTime, MessageDeliveryId);
CREATE INDEX IX_MessageDelivery_FetchPart ON [transport].[MessageDelivery] (QueueId, PartitionKey, Priority, EnqueueTime, MessageDeliveryId);
CREATE INDEX IX_MessageDelivery_TransportMessageId ON [transport].[MessageDelivery] (TransportMessageId)
""")

# NServiceBus.Transport.SqlServer SqlServerConstants.cs, CreateQueueText (lines 187-214): a heap
# with a nonclustered RowVersion index and a filtered Expires index. Receive (lines 89-92): TOP(1)
# ... WITH (UPDLOCK, READPAST, ROWLOCK) ORDER BY RowVersion, DELETE ... OUTPUT.
NSERVICEBUS = Upstream(
    library="NServiceBus SQL Server transport", repository="Particular/NServiceBus.SqlServer",
    file="src/NServiceBus.Transport.SqlServer/Queuing/SqlServerConstants.cs",
    version="9.1.0-alpha.1-9-g214c4e8f", commit="214c4e8f06175186e356677546ea2d8e0f2b0c55",
    ddl="""
CREATE TABLE [dbo].[Sales] (
    Id uniqueidentifier NOT NULL,
    CorrelationId varchar(255),
    ReplyToAddress varchar(255),
    Recoverable bit NOT NULL,
    Expires datetime,
    Headers nvarchar(max) NOT NULL,
    Body varbinary(max),
    RowVersion bigint IDENTITY(1,1) NOT NULL
);
CREATE NONCLUSTERED INDEX Index_RowVersion ON [dbo].[Sales] ([RowVersion] ASC);
CREATE NONCLUSTERED INDEX Index_Expires ON [dbo].[Sales] (Expires) INCLUDE (Id, RowVersion) WHERE Expires IS NOT NULL
""")

# Rebus.SqlServer SqlServerTransport.cs, EnsureTableIsCreated (lines 176-219): PRIMARY KEY CLUSTERED
# (priority, id), IDX_RECEIVE_<schema>_<table> (priority DESC, visible, id, expiration) and
# IDX_EXPIRATION_<schema>_<table> (expiration). Receive (lines 377-392): TOP 1 ... WITH (ROWLOCK,
# READPAST, READCOMMITTEDLOCK) WHERE visible < sysdatetimeoffset() AND expiration >
# sysdatetimeoffset() ORDER BY priority DESC, visible ASC, id ASC, then DELETE ... OUTPUT.
REBUS = Upstream(
    library="Rebus SQL Server transport", repository="rebus-org/Rebus.SqlServer",
    file="Rebus.SqlServer/SqlServer/Transport/SqlServerTransport.cs",
    version="8.4.1", commit="1ee018e552c633c54182e5cdcebccb212402b3d9",
    ddl="""
CREATE TABLE [dbo].[orders] (
    [id] bigint IDENTITY(1,1) NOT NULL,
    [priority] int NOT NULL,
    [expiration] datetimeoffset NOT NULL,
    [visible] datetimeoffset NOT NULL,
    [headers] varbinary(max) NOT NULL,
    [body] varbinary(max) NOT NULL,
    CONSTRAINT [PK_dbo_orders] PRIMARY KEY CLUSTERED ([priority] ASC, [id] ASC)
);
CREATE NONCLUSTERED INDEX [IDX_RECEIVE_dbo_orders] ON [dbo].[orders] ([priority] DESC, [visible] ASC, [id] ASC, [expiration] ASC);
CREATE NONCLUSTERED INDEX [IDX_EXPIRATION_dbo_orders] ON [dbo].[orders] ([expiration] ASC)
""")

# The seeds' SimpleQueue (lease-queue.txt; its PostgreSQL transcription is tests/mapping/shapes.py).
SIMPLE_QUEUE = Upstream(
    library="SimpleQueue (seeds)", repository="(seeds)", file="lease-queue.txt", version="seeds", commit="",
    ddl="""
CREATE TABLE [dbo].[SimpleQueue] (
    [Id] uniqueidentifier NOT NULL,
    [CreatedAt] datetime2 NOT NULL,
    [ProcessingStartedAt] datetime2 NULL,
    [Errors] nvarchar(max) NULL,
    [Payload] nvarchar(max) NULL,
    CONSTRAINT [PK_SimpleQueue] PRIMARY KEY CLUSTERED ([Id])
);
CREATE INDEX [IX_SIMPLEQUEUE_POP] ON [dbo].[SimpleQueue] ([ProcessingStartedAt], [CreatedAt]) INCLUDE ([Id])
    WHERE [ProcessingStartedAt] IS NULL
""")

BY_PRESET = {"hangfire": HANGFIRE, "masstransit": MASSTRANSIT, "nservicebus": NSERVICEBUS, "rebus": REBUS,
             "simple_queue": SIMPLE_QUEUE}
