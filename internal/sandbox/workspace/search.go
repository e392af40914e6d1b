package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

var _ sandbox.FileSearcher = (*Workspace)(nil)

// FindFiles implements sandbox.FileSearcher with one walk of the directory.
func (w *Workspace) FindFiles(ctx context.Context, req sandbox.FindRequest) (sandbox.FindResult, error) {
	if !doublestar.ValidatePattern(req.Pattern) {
		return sandbox.FindResult{}, fmt.Errorf("find: invalid pattern %q", req.Pattern)
	}
	root, rel, err := w.openDir("find in", req.Dir)
	if err != nil {
		return sandbox.FindResult{}, err
	}
	defer root.Close()
	names, cut, err := walk(ctx, root, rel, req.Prune, req.MaxListed, func(d fs.DirEntry) bool { return !d.IsDir() })
	if err != nil {
		return sandbox.FindResult{}, err
	}
	var out sandbox.FindResult
	out.Cut = cut
	for _, name := range names {
		if ok, _ := doublestar.Match(req.Pattern, name); ok {
			out.Paths = append(out.Paths, joinDir(req.Dir, name))
		}
	}
	return out, nil
}

// GrepFiles implements sandbox.FileSearcher: one walk, then each file read locally.
func (w *Workspace) GrepFiles(ctx context.Context, req sandbox.GrepRequest) (sandbox.GrepResult, error) {
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return sandbox.GrepResult{}, fmt.Errorf("grep: %w", err)
	}
	var files []string
	var out sandbox.GrepResult
	if info, statErr := w.stat(req.Dir); statErr == nil && info.Mode().IsRegular() {
		files = []string{req.Dir}
	} else {
		root, rel, err := w.openDir("grep in", req.Dir)
		if err != nil {
			return sandbox.GrepResult{}, err
		}
		names, cut, err := walk(ctx, root, rel, req.Prune, 0, func(d fs.DirEntry) bool {
			if !d.Type().IsRegular() {
				return false
			}
			info, err := d.Info()
			return err == nil && (req.MaxFileSize <= 0 || info.Size() <= req.MaxFileSize)
		})
		root.Close()
		if err != nil {
			return sandbox.GrepResult{}, err
		}
		out.Cut = cut
		for _, name := range names {
			files = append(files, joinDir(req.Dir, name))
		}
	}
	if req.MaxFiles > 0 && len(files) > req.MaxFiles {
		files, out.Cut = files[:req.MaxFiles], true
	}
	out.Files = len(files)
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return sandbox.GrepResult{}, err
		}
		data, err := w.ReadFile(ctx, f)
		if err != nil || (req.MaxFileSize > 0 && int64(len(data)) > req.MaxFileSize) || sandbox.IsBinary(data) {
			out.Skipped++
			continue
		}
		for i, line := range sandbox.SplitLines(string(data)) {
			if !re.MatchString(line) {
				continue
			}
			out.Total++
			if req.MaxMatches <= 0 || len(out.Matches) < req.MaxMatches {
				out.Matches = append(out.Matches, sandbox.GrepMatch{Path: f, Line: i + 1, Text: line})
			}
		}
	}
	return out, nil
}

func (w *Workspace) stat(p string) (fs.FileInfo, error) {
	if p == "" {
		return nil, fs.ErrInvalid
	}
	root, rel, err := w.open(p)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Stat(rel)
}

// openDir opens the workspace root and resolves dir ("" is the root) to a directory in it,
// with the errors Exec gives for the same Dir.
func (w *Workspace) openDir(op, dir string) (*os.Root, string, error) {
	root, rel, err := w.open(dirOrRoot(dir))
	if err != nil {
		return nil, "", err
	}
	info, err := root.Stat(rel)
	if err != nil {
		root.Close()
		return nil, "", describe(op, dir, err)
	}
	if !info.IsDir() {
		root.Close()
		return nil, "", fmt.Errorf("%s %q: %w", op, dir, syscall.ENOTDIR)
	}
	return root, rel, nil
}

// walk lists the entries under dir for which keep holds, as paths relative to dir, sorted,
// skipping (with their subtrees) entries named in prune. Symbolic links are listed, never
// followed. max > 0 stops the walk after that many entries (cut).
func walk(ctx context.Context, root *os.Root, dir string, prune []string, max int, keep func(fs.DirEntry) bool) (names []string, cut bool, err error) {
	fsys, err := fs.Sub(root.FS(), dir)
	if err != nil {
		return nil, false, fmt.Errorf("walk %q: %w", dir, err)
	}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable directories are skipped, as find's complaints are dropped
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if slices.Contains(prune, d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if keep(d) {
			if max > 0 && len(names) >= max {
				cut = true
				return fs.SkipAll
			}
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	slices.Sort(names)
	return names, cut, nil
}

func dirOrRoot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

func joinDir(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return path.Join(dir, name)
}
