package agent_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/managed-agents/managed-agents/internal/agent"
	"github.com/managed-agents/managed-agents/internal/model"
	"github.com/managed-agents/managed-agents/internal/model/catalog"
	"github.com/managed-agents/managed-agents/internal/wire"
)

// funcModel answers each request with a function of the request and its number.
type funcModel struct {
	mu       sync.Mutex
	answer   func(n int, req model.Request) (model.Response, error)
	requests []model.Request
}

func (m *funcModel) Create(ctx context.Context, req model.Request) (model.Response, error) {
	return m.Stream(ctx, req, nil)
}

func (m *funcModel) Stream(_ context.Context, req model.Request, _ func(model.Delta)) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, req)
	return m.answer(len(m.requests)-1, req)
}

// smallWindow is a catalog where the model "small" has a 4000-token window.
func smallWindow(t *testing.T) *catalog.Table {
	t.Helper()
	tab, err := catalog.Builtin().Override([]byte(`[{"id":"small","context_window":4000,"max_output_tokens":1000,"min_cacheable_tokens":1024}]`))
	require.NoError(t, err)
	return tab
}

func isSummaryRequest(req model.Request) bool {
	last := req.Messages[len(req.Messages)-1].Content
	return strings.Contains(last[len(last)-1].Text, "will be replaced by your summary")
}

var tooLong = &model.Error{Kind: model.ErrInvalid, Status: 400, Message: "prompt is too long: 9000 tokens > 4000 maximum", PromptTooLong: true}

func TestCompaction(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("lorem ipsum ", 1100) // ~3300 tokens by the estimate: past 75% of 4000
	tests := []struct {
		name    string
		history []string // earlier user messages, each answered "ok"
		answer  func(n int, req model.Request) (model.Response, error)
		// wantStop is the turn's stop reason; wantCompacted whether a summary was logged.
		wantStop      string
		wantCompacted bool
		wantError     string
	}{
		{
			name:    "before the request: the estimate passes the window's share",
			history: []string{big},
			answer: func(_ int, req model.Request) (model.Response, error) {
				if isSummaryRequest(req) {
					return model.Response{Content: []model.Block{text("SUMMARY: the user sent lorem ipsum")}, StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: 3000, OutputTokens: 10}}, nil
				}
				return model.Response{Content: []model.Block{text("continued")}, StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: 100, OutputTokens: 5}}, nil
			},
			wantStop: agent.StopEndTurn, wantCompacted: true,
		},
		{
			name:    "after the API says the prompt is too long",
			history: []string{"short"},
			answer: func(n int, req model.Request) (model.Response, error) {
				switch {
				case isSummaryRequest(req):
					return model.Response{Content: []model.Block{text("SUMMARY: short")}, StopReason: model.StopEndTurn}, nil
				case n == 0:
					return model.Response{}, tooLong
				}
				return model.Response{Content: []model.Block{text("continued")}, StopReason: model.StopEndTurn}, nil
			},
			wantStop: agent.StopEndTurn, wantCompacted: true,
		},
		{
			name:    "a summary request that is itself too long is sent again with its blocks cut short",
			history: []string{big},
			answer: func(_ int, req model.Request) (model.Response, error) {
				if isSummaryRequest(req) {
					if len(req.Messages[0].Content[0].Text) > 1000 {
						return model.Response{}, tooLong
					}
					return model.Response{Content: []model.Block{text("SUMMARY: cut short")}, StopReason: model.StopEndTurn}, nil
				}
				return model.Response{Content: []model.Block{text("continued")}, StopReason: model.StopEndTurn}, nil
			},
			wantStop: agent.StopEndTurn, wantCompacted: true,
		},
		{
			name:    "nothing can make it fit: compaction_limit_reached_error",
			history: []string{"short"},
			answer: func(int, model.Request) (model.Response, error) {
				return model.Response{}, tooLong
			},
			wantStop: agent.StopRetriesExhausted, wantError: wire.SessionErrorCompactionLimit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := &funcModel{answer: func(n int, req model.Request) (model.Response, error) {
				return model.Response{Content: []model.Block{text("ok")}, StopReason: model.StopEndTurn}, nil
			}}
			s := newSession(t, noTools, m)
			s.rt = agent.NewRuntime(agent.NewCore(m, agent.WithCatalog(smallWindow(t))))
			s.agent.Model = wire.Model{ID: "small"}
			for _, h := range tt.history {
				s.say(h)
				s.run(t.Context())
			}
			m.mu.Lock()
			m.answer, m.requests = tt.answer, nil
			m.mu.Unlock()

			s.say("go on")
			out, evs := s.run(t.Context())
			require.Equal(t, tt.wantStop, out.StopReason)
			compactions := ofType(evs, wire.EventAgentThreadContextCompacted)
			if tt.wantError != "" {
				errs := ofType(evs, wire.EventSessionError)
				require.Len(t, errs, 1)
				require.Equal(t, tt.wantError, body(t, errs[0])["error"].(map[string]any)["type"])
				require.Empty(t, compactions)
				return
			}
			require.Len(t, compactions, 1)
			require.JSONEq(t, `{}`, string(compactions[0].Body), "clients see no summary")

			// The summary request asks without tools and sends the conversation; the request
			// after it sends only the continuation, which is what projecting the log gives.
			var after model.Request
			for i, r := range m.requests {
				if isSummaryRequest(r) {
					require.Equal(t, model.ToolChoiceNone, r.ToolChoice)
					after = m.requests[i+1]
				}
			}
			require.Len(t, after.Messages, 1)
			require.Contains(t, after.Messages[0].Content[0].Text, "<summary>\nSUMMARY:")
			projected, err := agent.Project(s.log.Events())
			require.NoError(t, err)
			require.Equal(t, after.Messages[0], projected[0], "a replay projects what the worker sent")
			require.Equal(t, "continued", projected[1].Content[0].Text)

			// The summarisation was paid for: its usage is in the request's span.
			ends := ofType(evs, wire.EventSpanModelRequestEnd)
			var in int64
			for _, e := range ends {
				in += int64(body(t, e)["model_usage"].(map[string]any)["input_tokens"].(float64))
			}
			if tt.name == "before the request: the estimate passes the window's share" {
				require.EqualValues(t, 3100, in)
			}
		})
	}
}
