-- When Redis first got the voucher's counter. The gateway loads a voucher
-- lazily only while this is NULL, claiming it in the same statement; once set,
-- keys that go missing from Redis (a flush, a lost AOF) are restored by the
-- reconciler from PostgreSQL's rows plus the events still in flight, never
-- from total_limit - used_count alone, which would offer uses already taken.
ALTER TABLE voucher ADD COLUMN redis_loaded_at TIMESTAMPTZ;
