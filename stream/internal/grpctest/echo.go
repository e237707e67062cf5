package grpctest

import (
	"errors"
	"io"
	"slices"

	"google.golang.org/grpc"
)

// RawCodec carries a message's bytes as they are: the echo service needs
// no protobuf, and a test checks every byte. Messages are *[]byte.
type RawCodec struct{}

func (RawCodec) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (RawCodec) Unmarshal(data []byte, v any) error { *v.(*[]byte) = slices.Clone(data); return nil }
func (RawCodec) Name() string                       { return "raw" }

// Echo answers every message of every call, unary or streaming, with its
// bytes; serve it as grpc.UnknownServiceHandler(Echo) with RawCodec.
func Echo(_ any, ss grpc.ServerStream) error {
	for {
		var m []byte
		if err := ss.RecvMsg(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&m); err != nil {
			return err
		}
	}
}
