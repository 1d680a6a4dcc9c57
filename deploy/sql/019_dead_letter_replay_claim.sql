-- A replay claims its letter before it sends anything (issue 44).
--
-- `dlt replay` used to send first and record after Kafka acknowledged: two
-- replays of one letter at the same moment both read it parked and unsent,
-- both sent the event, and both recorded "sent". A replay now takes the
-- letter with one conditional UPDATE (parked, never sent, no live claim),
-- which only one caller wins; it then sends, then records replay_sent_at.
-- A claim older than the replay's longest delivery wait (15 minutes,
-- writer/wr_letters.h WR_REPLAY_CLAIM_TTL_S) belongs to a replay that died:
-- another may take it over. A discard waits for a live claim too, so a
-- letter is never discarded while its event is on its way back to the main
-- topic.
ALTER TABLE dead_letter
    ADD COLUMN replay_claimed_at TIMESTAMPTZ, -- when a `dlt replay` took it
    ADD COLUMN replay_claim      TEXT;        -- which replay: operator@host:pid
