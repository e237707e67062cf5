package main

import (
	"errors"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// startProfiles starts a CPU profile and an execution trace of this process
// into the named files (either may be empty) and returns the function that
// stops them and closes the files. A two-process run is profiled by giving
// the flag to each side: each writes its own process's view.
func startProfiles(cpuFile, traceFile string) (stop func() error, err error) {
	var stops []func() error
	stop = func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	}
	start := func(name string, begin func(*os.File) error, end func()) error {
		if name == "" {
			return nil
		}
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		if err := begin(f); err != nil {
			f.Close()
			return err
		}
		stops = append(stops, func() error { end(); return f.Close() })
		return nil
	}
	if err := start(cpuFile, func(f *os.File) error { return pprof.StartCPUProfile(f) }, pprof.StopCPUProfile); err != nil {
		return nil, errors.Join(err, stop())
	}
	if err := start(traceFile, func(f *os.File) error { return trace.Start(f) }, trace.Stop); err != nil {
		return nil, errors.Join(err, stop())
	}
	return stop, nil
}
