package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// JSONWriter writes results as JSON lines: one object per line per (test,
// size), in the schema of [Result].
type JSONWriter struct {
	enc *json.Encoder
}

// NewJSONWriter returns a JSONWriter writing to w. Each Write is one
// w.Write call, so lines are never interleaved with other output.
func NewJSONWriter(w io.Writer) *JSONWriter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &JSONWriter{enc: enc}
}

// Write writes r as one line. It fails on NaN and infinite values, which
// JSON cannot carry.
func (jw *JSONWriter) Write(r Result) error {
	if err := jw.enc.Encode(&r); err != nil {
		return fmt.Errorf("report: %s: %w", r.Label(), err)
	}
	return nil
}

// maxLine bounds one JSON line when reading (histograms make lines long).
const maxLine = 16 << 20

// ReadJSON reads results written by [JSONWriter], skipping blank lines, so
// that a previous run can serve as a baseline or for a projection. Unknown
// fields are ignored; an error names the line.
func ReadJSON(rd io.Reader) ([]Result, error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(nil, maxLine)
	var out []Result
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("report: JSON line %d: %w", line, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("report: reading JSON lines: %w", err)
	}
	return out, nil
}
