package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// The encoding of frames in NOTIFY payloads. PostgreSQL rejects a payload of 8000 bytes or
// more (with the default block size), so a frame's JSON is cut into parts, each sent as
// "1:<frame id>:<index>:<count>:<chunk>" and joined again by the receiver. The JSON is made
// pure ASCII first, so a cut can fall anywhere and no server encoding can reject a payload.
const (
	partVersion = "1"
	// partChunk leaves room below the limit for the header (frame ids are short).
	partChunk = 7800
	// maxParts bounds one frame (about 2 MB) and what a receiver holds for it.
	maxParts = 256
)

// Bounds of a receiver's incomplete frames. Parts of one frame are sent together, so a
// frame still incomplete after partTimeout lost a part and never completes.
const (
	partTimeout      = 10 * time.Second
	maxPendingFrames = 64
	maxPendingBytes  = 8 << 20
)

// encodeParts returns f's NOTIFY payloads, in order, and their total size.
func encodeParts(f Frame, frameID string) ([]string, int, error) {
	b, err := json.Marshal(transportFrame(f))
	if err != nil {
		return nil, 0, fmt.Errorf("stream: encode frame: %w", err)
	}
	b = asciiJSON(b)
	n := (len(b) + partChunk - 1) / partChunk
	if n > maxParts {
		return nil, 0, fmt.Errorf("%w: %d bytes encoded, at most %d", ErrInvalidFrame, len(b), maxParts*partChunk)
	}
	parts := make([]string, n)
	size := 0
	for i := range n {
		chunk := b[i*partChunk : min((i+1)*partChunk, len(b))]
		parts[i] = partVersion + ":" + frameID + ":" + strconv.Itoa(i) + ":" + strconv.Itoa(n) + ":" + string(chunk)
		size += len(parts[i])
	}
	return parts, size, nil
}

// transportFrame has Frame's fields and json tags but not its wire MarshalJSON.
type transportFrame Frame

func decodeFrame(b []byte) (Frame, error) {
	var t transportFrame
	if err := json.Unmarshal(b, &t); err != nil {
		return Frame{}, fmt.Errorf("stream: decode frame: %w", err)
	}
	f := Frame(t)
	if err := f.validate(); err != nil {
		return Frame{}, fmt.Errorf("stream: decode frame: %w", err)
	}
	return f, nil
}

// asciiJSON escapes every non-ASCII character of a JSON text as \uXXXX. Such characters
// occur only inside strings, so the result means the same.
func asciiJSON(b []byte) []byte {
	first := -1
	for i, c := range b {
		if c >= utf8.RuneSelf {
			first = i
			break
		}
	}
	if first < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+len(b)/2)
	out = append(out, b[:first]...)
	// json.Marshal writes valid UTF-8, so ranging over runes loses nothing.
	for _, r := range string(b[first:]) {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}

// part is one parsed NOTIFY payload.
type part struct {
	frameID      string
	index, count int
	data         string
}

var errBadPart = errors.New("stream: not a preview part")

func parsePart(payload string) (part, error) {
	fields := strings.SplitN(payload, ":", 5)
	if len(fields) != 5 || fields[0] != partVersion || fields[1] == "" || fields[4] == "" {
		return part{}, errBadPart
	}
	index, err1 := strconv.Atoi(fields[2])
	count, err2 := strconv.Atoi(fields[3])
	if err1 != nil || err2 != nil || count < 1 || count > maxParts || index < 0 || index >= count {
		return part{}, errBadPart
	}
	return part{frameID: fields[1], index: index, count: count, data: fields[4]}, nil
}

// reassembler joins the parts of frames, which may interleave with other frames' parts. Its
// memory is bounded: the oldest incomplete frame is dropped to make room, and frames that
// stay incomplete for partTimeout are dropped. One listening connection owns it.
type reassembler struct {
	pending map[string]*partial
	bytes   int
}

type partial struct {
	parts []string
	got   int
	size  int
	first time.Time
}

// add records p and returns its frame's encoding once every part is in.
func (r *reassembler) add(p part, now time.Time) ([]byte, bool) {
	if p.count == 1 {
		return []byte(p.data), true
	}
	if r.pending == nil {
		r.pending = map[string]*partial{}
	}
	r.expire(now)
	pt := r.pending[p.frameID]
	if pt == nil {
		if len(r.pending) >= maxPendingFrames {
			r.dropOldest()
		}
		pt = &partial{parts: make([]string, p.count), first: now}
		r.pending[p.frameID] = pt
	}
	if len(pt.parts) != p.count || pt.parts[p.index] != "" {
		r.drop(p.frameID) // a corrupt or repeated part: the frame cannot be trusted
		return nil, false
	}
	pt.parts[p.index] = p.data
	pt.got++
	pt.size += len(p.data)
	r.bytes += len(p.data)
	for r.bytes > maxPendingBytes && len(r.pending) > 0 {
		r.dropOldest()
	}
	if r.pending[p.frameID] != pt || pt.got < p.count {
		return nil, false
	}
	r.drop(p.frameID)
	return []byte(strings.Join(pt.parts, "")), true
}

func (r *reassembler) expire(now time.Time) {
	for id, pt := range r.pending {
		if now.Sub(pt.first) >= partTimeout {
			r.drop(id)
		}
	}
}

func (r *reassembler) dropOldest() {
	oldest := ""
	var at time.Time
	for id, pt := range r.pending {
		if oldest == "" || pt.first.Before(at) {
			oldest, at = id, pt.first
		}
	}
	r.drop(oldest)
}

func (r *reassembler) drop(frameID string) {
	if pt, ok := r.pending[frameID]; ok {
		r.bytes -= pt.size
		delete(r.pending, frameID)
	}
}
