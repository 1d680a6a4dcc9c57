-- Direct mode (issue 46, proto/direct-mode.md), slice 2: the gateway decides a
-- direct voucher in PostgreSQL alone (the dr_* functions of functions.sql), so
-- a new voucher created without a mode is a direct one from now on, the
-- design's default: an ordinary voucher needs neither Redis nor Kafka, and
-- answers while they are down. A flash sale marks its voucher 'flash' at its
-- creation (POST /vouchers with "mode": "flash", as deploy/run does).
-- The vouchers that exist keep the mode they have: those from before 025 are
-- flash (025's default), and a running sale is decided as before. Schema only.
ALTER TABLE voucher ALTER COLUMN mode SET DEFAULT 'direct';
