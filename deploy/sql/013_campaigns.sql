-- One-time code campaigns (proto/campaigns.md): a campaign's rules and state,
-- and its codes, one row each, written once by COPY and never updated. The
-- primary key on campaign_code.code is what refuses a code drawn twice, in one
-- campaign or across campaigns; the generator draws such a batch again.

CREATE TABLE campaign (
    id                  BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                TEXT        NOT NULL CONSTRAINT ck_campaign_name CHECK (length(name) BETWEEN 1 AND 200),
    state               VARCHAR(16) NOT NULL DEFAULT 'GENERATING'
                        CONSTRAINT ck_campaign_state CHECK (state IN ('GENERATING', 'ACTIVE', 'INACTIVE', 'FAILED')),
    alphabet            VARCHAR(16) NOT NULL CONSTRAINT ck_campaign_alphabet CHECK (alphabet IN ('safe32', 'digits')),
    prefix              VARCHAR(8)  NOT NULL DEFAULT ''
                        CONSTRAINT ck_campaign_prefix CHECK (prefix ~ '^[A-Z0-9]{0,8}$'),
    code_length         INT         NOT NULL CONSTRAINT ck_campaign_length CHECK (code_length BETWEEN 6 AND 24),
    check_symbol        BOOLEAN     NOT NULL DEFAULT false,
    total_count         INT         NOT NULL CONSTRAINT ck_campaign_count CHECK (total_count BETWEEN 1 AND 10000000),
    generated_count     INT         NOT NULL DEFAULT 0,
    discount_amount     BIGINT      NOT NULL DEFAULT 0 CONSTRAINT ck_campaign_discount CHECK (discount_amount >= 0),
    discount_percent    INT         CONSTRAINT ck_campaign_percent CHECK (discount_percent BETWEEN 1 AND 100),
    max_discount_amount BIGINT      CONSTRAINT ck_campaign_max_discount CHECK (max_discount_amount >= 1),
    min_order_amount    BIGINT      NOT NULL DEFAULT 0 CONSTRAINT ck_campaign_min_order CHECK (min_order_amount >= 0),
    per_customer_limit  INT         NOT NULL DEFAULT 1 CONSTRAINT ck_campaign_per_customer CHECK (per_customer_limit >= 1),
    starts_at           TIMESTAMPTZ NOT NULL,
    ends_at             TIMESTAMPTZ NOT NULL,
    used_count          INT         NOT NULL DEFAULT 0 CONSTRAINT ck_campaign_used_nonneg CHECK (used_count >= 0),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT ck_campaign_generated CHECK (generated_count BETWEEN 0 AND total_count),
    CONSTRAINT ck_campaign_used CHECK (used_count <= total_count),
    CONSTRAINT ck_campaign_window CHECK (ends_at > starts_at),
    CONSTRAINT ck_campaign_one_discount CHECK ((discount_amount > 0) <> (discount_percent IS NOT NULL)),
    CONSTRAINT ck_campaign_fits CHECK (length(prefix) + code_length <= 32)
);

-- Equal prefixes never; a prefix that starts another is refused by the
-- creation, under an advisory lock (vc_campaign_create()).
CREATE UNIQUE INDEX uq_campaign_prefix ON campaign (prefix) WHERE prefix <> '';

-- Written at up to a million rows in seconds (tests/bench/campaign), which
-- decides three things here. The code collates as "C": the primary key
-- compares bytes, not locale rules, and a code is ASCII anyway. There is no
-- foreign key to campaign: its per-row check doubled the time of a COPY; the
-- generator writes codes only for a campaign row it has just read, and
-- campaign rows are never deleted. The export walks seq, the code's place in
-- its campaign in the order it was drawn (bound codes first): an index that
-- grows at its right edge, where one on (campaign_id, code) grew at random
-- places and cost as much as the primary key.
CREATE TABLE campaign_code (
    code        VARCHAR(32) COLLATE "C" NOT NULL CONSTRAINT campaign_code_pkey PRIMARY KEY,
    campaign_id BIGINT      NOT NULL,
    seq         INT         NOT NULL CONSTRAINT ck_campaign_code_seq CHECK (seq >= 1),
    customer_id BIGINT      CONSTRAINT ck_campaign_code_customer CHECK (customer_id >= 1)
);

CREATE UNIQUE INDEX uq_campaign_code_seq ON campaign_code (campaign_id, seq);

-- The gateway creates campaigns and writes their codes (COPY needs INSERT),
-- shows their progress and deactivates them; it changes no rule afterwards
-- and never deletes a code. The reconciler will read both.
GRANT SELECT ON campaign, campaign_code TO voucher_gateway;
GRANT INSERT (name, state, alphabet, prefix, code_length, check_symbol, total_count,
              discount_amount, discount_percent, max_discount_amount, min_order_amount,
              per_customer_limit, starts_at, ends_at)
    ON campaign TO voucher_gateway;
GRANT UPDATE (state, generated_count, updated_at) ON campaign TO voucher_gateway;
GRANT INSERT ON campaign_code TO voucher_gateway;
GRANT SELECT ON campaign, campaign_code TO voucher_reconciler;
