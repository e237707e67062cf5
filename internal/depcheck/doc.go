// Package depcheck holds no code: its test writes down goverbs' import
// rules (ARCHITECTURE.md "Layers") and fails when a package breaks them, in
// the manner of Go's own go/build/deps_test.go.
package depcheck
