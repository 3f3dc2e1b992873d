-- 0008: the system tenant's real creation time.  0001 inserted it with created_at 0, which the API
-- showed as 1970-01-01; it was created when 0001 ran, which schema_migrations recorded (applied_at, ms).
-- A new database gets that time here too, in the same start-up that applied 0001.

UPDATE tenants SET created_at = (SELECT applied_at FROM schema_migrations WHERE version = 1)
WHERE id = 't_system' AND created_at = 0 AND EXISTS (SELECT 1 FROM schema_migrations WHERE version = 1);
