//go:build unix

package mem_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/goverbs/goverbs/mem"
)

// Map a file, write a record, make it durable, and read it back from the
// file after Close.
func ExampleMapFile() {
	dir, err := os.MkdirTemp("", "mem-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "journal")

	r, err := mem.MapFile(path, 1<<16)
	if err != nil {
		log.Fatal(err)
	}
	record := []byte("commit 42")
	copy(r.Bytes()[512:], record)
	if err := r.Persist(512, len(record)); err != nil { // msync(MS_SYNC)
		log.Fatal(err)
	}
	fmt.Println("persistent:", r.Persistent())
	if err := r.Close(); err != nil {
		log.Fatal(err)
	}

	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes, %q at 512\n", len(b), b[512:512+len(record)])
	// Output:
	// persistent: true
	// 65536 bytes, "commit 42" at 512
}
