-- Identities: a Cloudflare Access sign-in lands only in an installation whose admin bound that
-- email's console user to Access (access_sign_in = 1); an email bound in several installations
-- must name one. Existing users whose email is in exactly one installation stay bound, so an
-- upgrade signs nobody out; an email present in several installations is bound nowhere until an
-- admin binds it. Appeals record the appellant's role (DSA Art. 20: the notifier contesting a
-- decision not to act, or the user affected by a restriction).

ALTER TABLE console_users ADD COLUMN access_sign_in INTEGER NOT NULL DEFAULT 0 CHECK (access_sign_in IN (0, 1));
UPDATE console_users SET access_sign_in = 1 WHERE email IN (SELECT email FROM console_users GROUP BY email HAVING COUNT(*) = 1);

ALTER TABLE appeals ADD COLUMN appellant_role TEXT CHECK (appellant_role IN ('notifier', 'affected'));
