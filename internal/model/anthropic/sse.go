package anthropic

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxSSELine bounds one line of the stream; the largest the API sends is one JSON delta.
const maxSSELine = 8 << 20

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	name string
	data []byte
}

// sseReader reads the text/event-stream format: "field: value" lines, events ended by a
// blank line, several data lines joined by "\n", lines starting with ":" ignored.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next event that carries data, or io.EOF when the stream ends. An event
// cut off by the end of the stream is dropped, as the format prescribes.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data bytes.Buffer
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.data = data.Bytes()
				return ev, nil
			}
			ev = sseEvent{}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		}
	}
}

// readLine returns one line without its "\n" or "\r\n".
func (s *sseReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxSSELine {
			return nil, fmt.Errorf("event stream line longer than %d bytes", maxSSELine)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, io.EOF // an unterminated last line belongs to an unfinished event
		default:
			return nil, err
		}
	}
}
