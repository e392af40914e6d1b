package upstream

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"
)

// Prompt caching, accounted as build-with-claude/prompt-caching describes it:
//
//   - The prompt is tools, then system, then messages, block by block; each block (a tool
//     definition, a system text block, a message content block) is one unit here. Before the
//     first message the tool_choice and thinking parameters join the prefix, because changing
//     them invalidates the cached messages but not the tools and system ("What invalidates
//     the cache"); the model and speed start it, because caches are per model and fast and
//     standard speed do not share one.
//   - A block with cache_control is a breakpoint; a top-level cache_control puts one on the
//     last block (automatic caching). At most 4 breakpoints (more answers 400); ttl "5m"
//     (default) or "1h", and a 1h breakpoint may not follow a 5m one ("Mixing different
//     TTLs").
//   - The prefix up to and including a breakpoint is a cache entry once a request with that
//     breakpoint succeeded, if it has at least the model's MinCacheableTokens ("Cache
//     limitations"): shorter prefixes are neither written nor read.
//   - A request reads the longest live entry that is a prefix of its prompt, looking at each
//     breakpoint and the 20 blocks before it (the automatic prefix check's lookback), and
//     writes an entry at each of its breakpoints past what it read. The lookback covers the
//     breakpoint's own block and the 20 before it.
//   - usage: cache_read_input_tokens is the prefix read, cache_creation_input_tokens the
//     tokens from there to the last breakpoint written, input_tokens the rest after it, so
//     that the prompt is read + creation + input ("Tracking cache performance").
//   - An entry lives for its TTL from its last write or read: a hit refreshes the entry read
//     and every live entry at a breakpoint of the prompt read ("the cache is refreshed for
//     no additional cost each time the cached content is used").

// Cache limits (build-with-claude/prompt-caching).
const (
	maxBreakpoints = 4
	lookbackBlocks = 20
)

var cacheTTLs = map[string]time.Duration{"5m": 5 * time.Minute, "1h": time.Hour}

// unit is one block of the prompt, as the cache sees it.
type unit struct {
	key    [32]byte // hash of the prompt up to and including this unit
	end    int64    // tokens of the prompt up to and including this unit
	ttl    string   // "" or the TTL of a breakpoint on this unit
	tokens int64
}

// cacheControl is a block's cache_control.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

// checkCacheControls checks every cache_control of the request: its shape, at most 4, and
// no 1h breakpoint after a 5m one.
func checkCacheControls(req *Request) *apiError {
	count := 0
	sawShort := false
	check := func(path string, raw json.RawMessage) *apiError {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		if path == "" {
			path = "cache_control" // the top-level one
		} else {
			path += ".cache_control"
		}
		ttl, err := readCacheControl(path, raw)
		if err != nil {
			return err
		}
		count++
		if ttl == "1h" && sawShort {
			return invalid("%s: a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block; longer-lived breakpoints come first", path)
		}
		if ttl == "5m" {
			sawShort = true
		}
		return nil
	}
	for i, t := range req.Tools {
		if err := check(fmt.Sprintf("tools.%d", i), t.CacheControl); err != nil {
			return err
		}
	}
	for i, b := range req.System {
		if err := check(fmt.Sprintf("system.%d", i), b.CacheControl); err != nil {
			return err
		}
	}
	for i, m := range req.Messages {
		for j, b := range m.Content {
			path := fmt.Sprintf("messages.%d.content.%d", i, j)
			if err := check(path, b.CacheControl); err != nil {
				return err
			}
			if b.Type == "tool_result" {
				nested, _ := resultContent(b.Content)
				for k, n := range nested {
					if err := check(fmt.Sprintf("%s.content.%d", path, k), n.CacheControl); err != nil {
						return err
					}
				}
			}
		}
	}
	if err := check("", req.CacheControl); err != nil {
		return err
	}
	if count > maxBreakpoints {
		return invalid("A maximum of %d blocks with cache_control may be provided. Found %d.", maxBreakpoints, count)
	}
	return nil
}

func readCacheControl(path string, raw json.RawMessage) (string, *apiError) {
	var cc cacheControl
	if json.Unmarshal(raw, &cc) != nil || cc.Type != "ephemeral" {
		return "", invalid("%s.type: Input should be 'ephemeral'", path)
	}
	if cc.TTL == "" {
		cc.TTL = "5m"
	}
	if _, ok := cacheTTLs[cc.TTL]; !ok {
		return "", invalid("%s.ephemeral.ttl: Input should be '5m' or '1h'", path)
	}
	return cc.TTL, nil
}

// promptUnits lays the prompt out block by block with the hash chain of its prefixes and
// the breakpoints. The request passed checkCacheControls.
func promptUnits(req *Request) []unit {
	var units []unit
	h := sha256.Sum256([]byte("model\x00" + req.Model + "\x00speed\x00" + req.Speed))
	var end int64
	add := func(canonical []byte, tokens int64, cc json.RawMessage, nested ...Block) {
		m := sha256.New()
		m.Write(h[:])
		m.Write(canonical)
		copy(h[:], m.Sum(nil))
		end += tokens
		u := unit{key: h, end: end, tokens: tokens}
		for _, raw := range append([]json.RawMessage{cc}, cacheControlsOf(nested)...) {
			if len(raw) > 0 && string(raw) != "null" {
				u.ttl, _ = readCacheControl("", raw)
			}
		}
		units = append(units, u)
	}
	mix := func(parts ...string) {
		m := sha256.New()
		m.Write(h[:])
		for _, p := range parts {
			m.Write([]byte(p))
			m.Write([]byte{0})
		}
		copy(h[:], m.Sum(nil))
	}
	for _, t := range req.Tools {
		cc := t.CacheControl
		t.CacheControl = nil
		add(canonicalJSON(t), toolTokens(t), cc)
	}
	for _, b := range req.System {
		cc := b.CacheControl
		add(canonicalBlock(b), blockTokens(b), cc)
	}
	mix("tool_choice", compactJSON(req.ToolChoice), "thinking", compactJSON(req.Thinking))
	for _, m := range req.Messages {
		mix("message", m.Role)
		for _, b := range m.Content {
			var nested []Block
			if b.Type == "tool_result" {
				nested, _ = resultContent(b.Content)
			}
			add(canonicalBlock(b), blockTokens(b), b.CacheControl, nested...)
		}
	}
	if len(units) > 0 && len(req.CacheControl) > 0 && string(req.CacheControl) != "null" {
		last := &units[len(units)-1]
		if last.ttl == "" {
			last.ttl, _ = readCacheControl("", req.CacheControl)
		}
	}
	return units
}

func cacheControlsOf(blocks []Block) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(blocks))
	for _, b := range blocks {
		out = append(out, b.CacheControl)
	}
	return out
}

// canonicalBlock is the block's bytes as the cache compares them: without its cache_control
// (moving a breakpoint does not change the prompt) and with nested tool_result content
// stripped of theirs too.
func canonicalBlock(b Block) []byte {
	b.CacheControl = nil
	if b.Type == "tool_result" {
		if nested, err := resultContent(b.Content); err == nil {
			for i := range nested {
				nested[i].CacheControl = nil
			}
			b.Content = canonicalJSON(nested)
		}
	}
	b.Input = json.RawMessage(compactJSON(b.Input))
	b.Source = json.RawMessage(compactJSON(b.Source))
	b.Citations = json.RawMessage(compactJSON(b.Citations))
	return canonicalJSON(b)
}

func canonicalJSON(v any) []byte {
	out, _ := json.Marshal(v)
	return out
}

// cacheEntry is one cached prefix.
type cacheEntry struct {
	expires time.Time
	ttl     time.Duration
}

// promptCache holds the entries of one server. It is guarded by the server's mutex.
type promptCache struct {
	entries map[[32]byte]*cacheEntry
}

// cachePlan is what one request reads and writes.
type cachePlan struct {
	read   int   // index of the last unit read from the cache, -1 for none
	writes []int // the breakpoints written, in order
	usage  Usage // the input side of the usage
}

// plan finds what the request reads and would write at time now; nothing changes until
// commit, so a request that ends in an error writes nothing.
func (c *promptCache) plan(units []unit, minTokens int, now time.Time) cachePlan {
	p := cachePlan{read: -1}
	live := func(i int) bool {
		e, ok := c.entries[units[i].key]
		return ok && now.Before(e.expires)
	}
	for b, u := range units {
		if u.ttl == "" {
			continue
		}
		for i := b; i > p.read && i >= b-lookbackBlocks; i-- {
			if live(i) {
				p.read = i
				break // the nearest hit below this breakpoint is the longest one it can find
			}
		}
	}
	var read int64
	if p.read >= 0 {
		read = units[p.read].end
	}
	written := read
	for b, u := range units {
		if u.ttl == "" || b <= p.read || u.end < int64(minTokens) {
			continue
		}
		p.writes = append(p.writes, b)
		segment := u.end - written
		if u.ttl == "1h" {
			p.usage.Ephemeral1hInputTokens += segment
		} else {
			p.usage.Ephemeral5mInputTokens += segment
		}
		written = u.end
	}
	var total int64
	if len(units) > 0 {
		total = units[len(units)-1].end
	}
	p.usage.CacheReadInputTokens = read
	p.usage.CacheCreationInputTokens = written - read
	p.usage.InputTokens = total - written
	return p
}

// commit writes the planned entries and refreshes the one read and every other live entry
// at a breakpoint of this prompt.
func (c *promptCache) commit(p cachePlan, units []unit, now time.Time) {
	if c.entries == nil {
		c.entries = map[[32]byte]*cacheEntry{}
	}
	if p.read >= 0 {
		if e, ok := c.entries[units[p.read].key]; ok {
			e.expires = now.Add(e.ttl)
		}
	}
	for _, u := range units {
		if u.ttl == "" {
			continue
		}
		if e, ok := c.entries[u.key]; ok && now.Before(e.expires) {
			e.expires = now.Add(e.ttl)
		}
	}
	for _, b := range p.writes {
		ttl := cacheTTLs[units[b].ttl]
		c.entries[units[b].key] = &cacheEntry{expires: now.Add(ttl), ttl: ttl}
	}
}
