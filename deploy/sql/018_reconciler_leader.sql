-- The reconciler's generation: the fencing token of its lock (proto/redis-keys.md,
-- "Leadership and fencing"; deploy/README.md, "Reconciler leadership").
--
-- One row. The reconciler that takes the advisory lock adds one to it in the
-- same statement (reconciler/rc_pg.c, rc_pg_try_lock()), in its own
-- committed transaction, and writes the new value into every voucher and
-- campaign it acts on in Redis before it acts; a script that carries an
-- older one is refused there. A row rather than a sequence: the update
-- commits (a flushed WAL record), so the value never goes back after a
-- crash of PostgreSQL, which a nextval() in a transaction that writes
-- nothing else does not promise; and it is never cached per session.
CREATE TABLE reconciler_leader (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    generation bigint NOT NULL DEFAULT 0 CHECK (generation >= 0)
);
INSERT INTO reconciler_leader (one, generation) VALUES (true, 0);

-- Least privilege: the reconciler reads and raises the generation, nothing
-- else of the table (the UPDATE names no other column); nobody else sees it.
REVOKE ALL ON reconciler_leader FROM PUBLIC;
GRANT SELECT (generation), UPDATE (generation) ON reconciler_leader TO voucher_reconciler;
