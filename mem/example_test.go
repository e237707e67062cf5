package mem_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/goverbs/goverbs/mem"
)

// Allocate a region, write to it, and close it.
func Example() {
	r, err := mem.Alloc(10_000) // rounded up to whole pages
	if err != nil {
		log.Fatal(err)
	}
	n := copy(r.Bytes(), "hello, verbs")
	fmt.Println(string(r.Bytes()[:n]))
	fmt.Println("whole pages:", r.Len() >= 10_000 && r.Len()%r.PageSize() == 0)
	if err := r.Close(); err != nil {
		log.Fatal(err)
	}
	// The slice from Bytes must not be used after Close; the region says so.
	fmt.Println("closed:", errors.Is(r.Close(), mem.ErrClosed), r.Bytes() == nil)
	// Output:
	// hello, verbs
	// whole pages: true
	// closed: true true
}

// Hold a region open while someone else uses its memory.
func ExampleRegion_Acquire() {
	r, err := mem.Alloc(4096)
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Acquire(); err != nil { // e.g. while a device has it registered
		log.Fatal(err)
	}
	fmt.Println("busy:", errors.Is(r.Close(), mem.ErrBusy))
	r.Release() // deregistered
	fmt.Println("closed:", r.Close() == nil)
	// Output:
	// busy: true
	// closed: true
}
