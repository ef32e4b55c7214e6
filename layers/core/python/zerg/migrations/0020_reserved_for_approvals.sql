-- Reserved: number 0020 belongs to the approvals branch of issue 27 (another engineer's), which is not
-- merged yet; migrations must be numbered without gaps, so this branch (budgets, 0021) carries this
-- no-op until then. At merge: keep the approvals branch's 0020 and drop this file.
SELECT 1;
