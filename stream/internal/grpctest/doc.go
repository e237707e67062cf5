// Package grpctest runs gRPC-Go over package stream: an echo service
// served on a stream.Listener and called through a client whose dialer
// returns stream.Conns, with gRPC itself unchanged. It is a module of its
// own so that gRPC stays out of goverbs' requirements.
package grpctest
