package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/managed-agents/managed-agents/internal/model"
)

// script is what the directives of one user message ask for.
type script struct {
	prose string
	calls []toolCall
	sleep time.Duration
	fail  *failure
	think bool
}

// toolCall is one /tool or /loop line.
type toolCall struct {
	name  string
	input json.RawMessage
	loop  bool
}

// failure is a /fail line.
type failure struct {
	kind  model.ErrorKind
	times int
}

// failStatus maps the KIND of /fail to the HTTP status a real endpoint would answer.
var failStatus = map[model.ErrorKind]int{
	model.ErrOverloaded:  529,
	model.ErrRateLimited: http.StatusTooManyRequests,
	model.ErrServer:      http.StatusInternalServerError,
	model.ErrInvalid:     http.StatusBadRequest,
}

func (f *failure) err(attempt int) error {
	return &model.Error{
		Kind:    f.kind,
		Status:  failStatus[f.kind],
		Message: fmt.Sprintf("fake model: /fail %s %d (attempt %d)", f.kind, f.times, attempt),
	}
}

// parseScript reads the directives of a message; the error says which line is wrong and why.
func parseScript(text string) (script, error) {
	var s script
	var prose []string
	for i, line := range strings.Split(text, "\n") {
		word, rest := cut(strings.TrimSpace(line))
		parse, ok := directives[word]
		if !ok {
			prose = append(prose, line)
			continue
		}
		if err := parse(&s, rest); err != nil {
			return script{}, fmt.Errorf("line %d: %s: %w", i+1, word, err)
		}
	}
	s.prose = strings.TrimSpace(strings.Join(prose, "\n"))
	return s, nil
}

var directives = map[string]func(s *script, args string) error{
	"/tool":  func(s *script, args string) error { return s.addCall(args, false) },
	"/loop":  func(s *script, args string) error { return s.addCall(args, true) },
	"/sleep": (*script).setSleep,
	"/fail":  (*script).setFail,
	"/think": (*script).setThink,
}

func (s *script) addCall(args string, loop bool) error {
	name, raw := cut(args)
	if name == "" || raw == "" {
		return errors.New(`needs a tool name and a JSON object, e.g. /tool bash {"command":"ls"}`)
	}
	var input bytes.Buffer
	if err := json.Compact(&input, []byte(raw)); err != nil {
		return fmt.Errorf("input of %s is not valid JSON: %w", name, err)
	}
	if input.Bytes()[0] != '{' {
		return fmt.Errorf("input of %s must be a JSON object, got %s", name, raw)
	}
	s.calls = append(s.calls, toolCall{name: name, input: input.Bytes(), loop: loop})
	return nil
}

func (s *script) setSleep(args string) error {
	if s.sleep > 0 {
		return errors.New("given twice")
	}
	ms, err := strconv.Atoi(args)
	if err != nil || ms < 0 {
		return fmt.Errorf("needs a whole number of milliseconds >= 0, got %q", args)
	}
	s.sleep = time.Duration(ms) * time.Millisecond
	return nil
}

func (s *script) setFail(args string) error {
	if s.fail != nil {
		return errors.New("given twice")
	}
	kind, count := cut(args)
	if _, ok := failStatus[model.ErrorKind(kind)]; !ok {
		return fmt.Errorf("unknown kind %q (expected overloaded, rate_limited, server or invalid)", kind)
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return fmt.Errorf("needs a number of calls >= 1 after the kind, got %q", count)
	}
	s.fail = &failure{kind: model.ErrorKind(kind), times: n}
	return nil
}

func (s *script) setThink(args string) error {
	if args != "" {
		return fmt.Errorf("takes no arguments, got %q", args)
	}
	s.think = true
	return nil
}

// reply is the content and stop reason of a call that neither waits nor fails.
func (s script) reply(conv conversation) ([]model.Block, string) {
	var content []model.Block
	if s.think {
		content = append(content, model.Block{
			Type:      model.BlockThinking,
			Thinking:  fmt.Sprintf("Call %d of this turn; the user wrote: %s", conv.call+1, s.prose),
			Signature: "fake_signature",
		})
	}
	if calls := s.callsAt(conv.call); len(calls) > 0 {
		for i, tc := range calls {
			content = append(content, model.Block{
				Type:  model.BlockToolUse,
				ID:    fmt.Sprintf("toolu_fake_%d", conv.toolUses+i+1),
				Name:  tc.name,
				Input: slices.Clone(tc.input),
			})
		}
		return content, model.StopToolUse
	}
	text := "echo: " + s.prose
	// Results answered on the first call after a message belong to a turn that was cut off
	// (interrupt, round cap): the new message is what to answer.
	if len(conv.results) > 0 && conv.call > 0 {
		text = summarize(conv.results)
	}
	return append(content, textBlock(strings.TrimSpace(text))), model.StopEndTurn
}

// callsAt returns the tool calls of call number n: every /loop line, and /tool lines on call 0.
func (s script) callsAt(n int) []toolCall {
	var out []toolCall
	for _, tc := range s.calls {
		if tc.loop || n == 0 {
			out = append(out, tc)
		}
	}
	return out
}

const resultPreviewChars = 200

// summarize writes one line per tool result.
func summarize(results []toolResult) string {
	lines := make([]string, len(results))
	for i, r := range results {
		label := r.name + ":"
		if r.isError {
			label = r.name + " error:"
		}
		lines[i] = strings.TrimSpace(label + " " + preview(r.text))
	}
	return strings.Join(lines, "\n")
}

func preview(text string) string {
	runes := []rune(strings.TrimSpace(text))
	if len(runes) > resultPreviewChars {
		runes = runes[:resultPreviewChars]
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(string(runes))
}

func textBlock(text string) model.Block {
	return model.Block{Type: model.BlockText, Text: text}
}

// cut splits s at its first run of blanks into a word and the trimmed rest.
func cut(s string) (word, rest string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}
