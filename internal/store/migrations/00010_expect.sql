-- +goose Up
-- ma_expect fails the statement that calls it, with message, unless ok is true. It is how a
-- write checks its own result on the server: store.Writes sends a transaction's writes in the
-- same batch as its COMMIT, so a check made by the client after reading the result would come
-- after the commit; made here, a failed check fails the batch before the COMMIT runs.
-- +goose StatementBegin
CREATE FUNCTION ma_expect(ok boolean, message text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION USING MESSAGE = message;
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION ma_expect(boolean, text);
