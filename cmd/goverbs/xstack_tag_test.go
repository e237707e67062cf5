//go:build cgo && rdmacore

package main

const rdmacoreBuilt = true
