package sandbox

import "context"

// track wraps sb so every failed operation is reported to failed. The wrapper keeps the
// optional capabilities sb has: callers find them by type assertion on what they are given.
func track(sb Sandbox, failed func(error)) Sandbox {
	t := tracked{sb: sb, failed: failed}
	if fs, ok := sb.(FileSearcher); ok {
		return trackedSearcher{tracked: t, fs: fs}
	}
	return t
}

type tracked struct {
	sb     Sandbox
	failed func(error)
}

func (t tracked) check(err error) error {
	if err != nil {
		t.failed(err)
	}
	return err
}

func (t tracked) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	res, err := t.sb.Exec(ctx, req)
	return res, t.check(err)
}

func (t tracked) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, err := t.sb.ReadFile(ctx, path)
	return data, t.check(err)
}

func (t tracked) WriteFile(ctx context.Context, path string, data []byte) error {
	return t.check(t.sb.WriteFile(ctx, path, data))
}

type trackedSearcher struct {
	tracked
	fs FileSearcher
}

func (t trackedSearcher) FindFiles(ctx context.Context, req FindRequest) (FindResult, error) {
	res, err := t.fs.FindFiles(ctx, req)
	return res, t.check(err)
}

func (t trackedSearcher) GrepFiles(ctx context.Context, req GrepRequest) (GrepResult, error) {
	res, err := t.fs.GrepFiles(ctx, req)
	return res, t.check(err)
}
