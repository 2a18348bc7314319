-- Which builds may use these tables (docs/operations.md, "Migrations across releases").
--
-- A build of cronverb starts against a database that a newer release migrated, as long as the newer
-- migrations are additive. A release whose migration removes or changes what older builds read (a
-- "contract" migration) raises `required_migration` in the same migration; a build whose newest
-- migration is older than it refuses the database at startup, naming both versions.
CREATE TABLE cron_compatibility (
    -- One row.
    id                 BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
    -- The oldest migration a build must know to use these tables.
    required_migration BIGINT NOT NULL
);
INSERT INTO cron_compatibility (required_migration) VALUES (1);

-- Every replica checks it at startup, also one whose role was granted only the four tables.
GRANT SELECT ON cron_compatibility TO PUBLIC;
