package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress draws a one-line progress indicator on a terminal, redrawn in
// place with a carriage return, and stays silent when the output is not a
// terminal (a file, a pipe), so that logs and --json output stay clean.
// Its methods are safe for concurrent use.
type Progress struct {
	mu       sync.Mutex
	w        io.Writer
	on       bool
	interval time.Duration // minimum time between redraws
	last     time.Time
	width    int // length of the line on screen, to erase it
}

// NewProgress returns a Progress writing to w, enabled only when w is an
// *os.File open on a character device (a terminal; also /dev/null, where
// drawing is harmless).
func NewProgress(w io.Writer) *Progress {
	return &Progress{w: w, on: isCharDevice(w), interval: 100 * time.Millisecond}
}

func isCharDevice(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Enabled reports whether the Progress draws.
func (p *Progress) Enabled() bool { return p.on }

// Update redraws the line with the formatted text, at most ten times a
// second; calls in between are dropped. Output errors are ignored: progress
// is decoration.
func (p *Progress) Update(format string, args ...any) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !p.last.IsZero() && now.Sub(p.last) < p.interval {
		return
	}
	p.last = now
	p.drawLocked(fmt.Sprintf(format, args...))
}

// Clear erases the line, so that the next output starts clean.
func (p *Progress) Clear() {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drawLocked("")
	p.last = time.Time{}
}

// maxProgress bounds the line so that it never wraps on an 80-column
// terminal, which would defeat the carriage return.
const maxProgress = 79

// drawLocked replaces the line with s, padding with spaces to erase what
// was longer (no terminal escapes needed).
// Precondition: p.mu is held.
func (p *Progress) drawLocked(s string) {
	if r := []rune(s); len(r) > maxProgress {
		s = string(r[:maxProgress])
	}
	n := len([]rune(s))
	pad := strings.Repeat(" ", max(p.width-n, 0))
	io.WriteString(p.w, "\r"+s+pad+"\r"+s)
	p.width = n
}
