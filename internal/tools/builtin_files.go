package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/managed-agents/managed-agents/internal/sandbox"
	"github.com/managed-agents/managed-agents/internal/wire"
)

type readInput struct {
	FilePath  string  `json:"file_path"`
	ViewRange []int64 `json:"view_range"`
}

// runRead prints a text file, or the lines view_range selects, numbered like `cat -n`. A PNG,
// JPEG, GIF or WebP image or a PDF (told by its first bytes, not its name) comes back as an
// image or document block instead (builtin_media.go). read keeps no call record
// (RunBuiltinOnce): a retried call reads the file again, which gives the same blocks.
func runRead(ctx context.Context, sb sandbox.Sandbox, raw json.RawMessage) Result {
	var in readInput
	if err := decodeInput(wire.ToolNameRead, raw, &in); err != nil {
		return errorf("%v", err)
	}
	if in.FilePath == "" {
		return inputError(wire.ToolNameRead, "file_path is required")
	}
	if in.ViewRange != nil && len(in.ViewRange) != 2 {
		return inputError(wire.ToolNameRead, "view_range must be [start, end] (got %d numbers)", len(in.ViewRange))
	}
	data, err := sb.ReadFile(ctx, in.FilePath)
	if err != nil {
		return sandboxError(wire.ToolNameRead, in.FilePath, err)
	}
	if m, ok := sniffMedia(data); ok {
		if in.ViewRange != nil {
			return errorf("read: %q is a %s; view_range applies to text files only, so read it without one", in.FilePath, m.name)
		}
		return mediaResult(in.FilePath, m, data)
	}
	if sandbox.IsBinary(data) {
		kind := unsupportedFormat(data)
		if kind == "" {
			return errorf("read: %q looks like a binary file (%d bytes) of a type read cannot show: it returns text files, PNG, JPEG, GIF and WebP images, and PDF documents; inspect it with bash (for example `file` or `xxd`)", in.FilePath, len(data))
		}
		return errorf("read: %q is %s (%d bytes), a binary type read cannot show: it returns text files, PNG, JPEG, GIF and WebP images, and PDF documents; convert it to PNG with bash (for example ImageMagick's `convert`, if installed) and read that", in.FilePath, kind, len(data))
	}
	lines := sandbox.SplitLines(string(data))
	first, last := 1, len(lines)
	if in.ViewRange != nil {
		var problem string
		first, last, problem = lineRange(in.ViewRange[0], in.ViewRange[1], len(lines))
		if problem != "" {
			return errorf("read: %s", problem)
		}
	}
	if len(lines) == 0 {
		return Result{Text: fmt.Sprintf("(%s is empty)", in.FilePath)}
	}
	return Result{Text: numberLines(lines[first-1:last], first)}
}

// lineRange checks a 1-indexed inclusive range against a file of n lines; end ≤ 0 means the
// last line.
func lineRange(start, end int64, n int) (first, last int, problem string) {
	if start < 1 {
		return 0, 0, fmt.Sprintf("view_range start must be 1 or more (got %d)", start)
	}
	if end > 0 && end < start {
		return 0, 0, fmt.Sprintf("view_range end %d is before start %d", end, start)
	}
	if n == 0 && start == 1 {
		return 1, 0, ""
	}
	if start > int64(n) {
		return 0, 0, fmt.Sprintf("view_range start %d is past the end of the file (%d lines)", start, n)
	}
	if end <= 0 || end > int64(n) {
		end = int64(n)
	}
	return int(start), int(end), ""
}

func numberLines(lines []string, first int) string {
	var b strings.Builder
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		num := strconv.Itoa(first + i)
		b.WriteString(strings.Repeat(" ", max(6-len(num), 0)))
		b.WriteString(num)
		b.WriteByte('\t')
		b.WriteString(line)
	}
	return b.String()
}

type writeInput struct {
	FilePath string  `json:"file_path"`
	Content  *string `json:"content"`
}

// runWrite creates or replaces a file, creating its parent directories.
func runWrite(ctx context.Context, sb sandbox.Sandbox, raw json.RawMessage) Result {
	var in writeInput
	if err := decodeInput(wire.ToolNameWrite, raw, &in); err != nil {
		return errorf("%v", err)
	}
	if in.FilePath == "" {
		return inputError(wire.ToolNameWrite, "file_path is required")
	}
	if in.Content == nil {
		return inputError(wire.ToolNameWrite, "content is required")
	}
	if err := sb.WriteFile(ctx, in.FilePath, []byte(*in.Content)); err != nil {
		return sandboxError(wire.ToolNameWrite, in.FilePath, err)
	}
	return Result{Text: fmt.Sprintf("Wrote %d bytes to %s.", len(*in.Content), in.FilePath)}
}

type editInput struct {
	FilePath   string  `json:"file_path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
}

// runEdit replaces old_string with new_string in a file. Without replace_all the old string
// must occur exactly once, so the model cannot change a place it did not mean.
func runEdit(ctx context.Context, sb sandbox.Sandbox, raw json.RawMessage) Result {
	in, problem := parseEdit(raw)
	if problem != nil {
		return *problem
	}
	data, err := sb.ReadFile(ctx, in.FilePath)
	if err != nil {
		return sandboxError(wire.ToolNameEdit, in.FilePath, err)
	}
	text, res := in.apply(string(data))
	if res.IsError {
		return res
	}
	if err := sb.WriteFile(ctx, in.FilePath, []byte(text)); err != nil {
		return sandboxError(wire.ToolNameEdit, in.FilePath, err)
	}
	return res
}

// parseEdit decodes and checks an edit input; a non-nil Result says what is wrong with it.
func parseEdit(raw json.RawMessage) (editInput, *Result) {
	var in editInput
	if err := decodeInput(wire.ToolNameEdit, raw, &in); err != nil {
		res := errorf("%v", err)
		return in, &res
	}
	if problem := in.check(); problem != "" {
		res := inputError(wire.ToolNameEdit, "%s", problem)
		return in, &res
	}
	return in, nil
}

// apply performs the edit on a file's text: it returns the new text and the success result,
// or an error result when old_string does not pick exactly the places to change.
func (in editInput) apply(text string) (string, Result) {
	oldS, newS := *in.OldString, *in.NewString
	n := strings.Count(text, oldS)
	switch {
	case n == 0:
		return "", errorf("edit: old_string was not found in %s (it must match exactly, including whitespace and indentation)", in.FilePath)
	case n > 1 && !in.ReplaceAll:
		return "", errorf("edit: old_string occurs %d times in %s; include more surrounding context to make it unique, or set replace_all to replace every occurrence", n, in.FilePath)
	}
	if !in.ReplaceAll {
		text = strings.Replace(text, oldS, newS, 1)
	} else {
		text = strings.ReplaceAll(text, oldS, newS)
	}
	return text, Result{Text: fmt.Sprintf("Edited %s: replaced %d occurrence%s.", in.FilePath, n, plural(n))}
}

func (in editInput) check() string {
	switch {
	case in.FilePath == "":
		return "file_path is required"
	case in.OldString == nil:
		return "old_string is required"
	case in.NewString == nil:
		return "new_string is required"
	case *in.OldString == "":
		return "old_string must not be empty (use write to create a file)"
	case *in.OldString == *in.NewString:
		return "old_string and new_string are identical, so the edit would change nothing"
	}
	return ""
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
