package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/goverbs/goverbs/verbs"
)

// roleFlags are the -c, -s and -a of the interop commands that play either
// side of an exchange, and the port (-p) the address goes with.
type roleFlags struct {
	client, server bool
	addr           string
	port           int
}

// register registers -c, -s and -a; the command registers -p. anyAddr
// says that a server without -a listens on every address (as rping -s).
func (r *roleFlags) register(fs *flag.FlagSet, anyAddr bool) {
	server, local := "server: listen on -a", "the local one (server)"
	if anyAddr {
		server, local = "server: listen on -a (default all addresses)", "the one to listen on (server)"
	}
	fs.BoolVar(&r.client, "c", false, "client: connect to -a")
	fs.BoolVar(&r.server, "s", false, server)
	fs.StringVar(&r.addr, "a", "", "`address`: the server's (client), "+local)
}

// hostPort is the address -a and -p name.
func (r *roleFlags) hostPort() string { return net.JoinHostPort(r.addr, strconv.Itoa(r.port)) }

// acceptOne listens on addr on dev, says so on stderr as "<who> listening
// on ADDR", and returns the first connection request; done closes the
// listener, once the request has been served.
func acceptOne(ctx context.Context, dev *verbs.Device, addr, who string, stderr io.Writer) (req *verbs.ConnRequest, done func(), err error) {
	ln, err := dev.Listen(addr)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stderr, "%s listening on %s\n", who, ln.Addr())
	if req, err = ln.Accept(ctx); err != nil {
		ln.Close()
		return nil, nil, err
	}
	return req, func() { ln.Close() }, nil
}

// dialOrServe plays one side of an exchange on dev and names the role it
// played: the client runs dial; the server accepts the first request on
// addr (acceptOne, announcing who is listening) and runs serve on it. ran
// is false when the server got no request to serve: the exchange never
// started.
func dialOrServe[R any](ctx context.Context, dev *verbs.Device, addr string, client bool, who string, stderr io.Writer,
	dial func() (R, error), serve func(*verbs.ConnRequest) (R, error)) (role string, res R, ran bool, err error) {
	if client {
		res, err = dial()
		return "client", res, true, err
	}
	req, done, err := acceptOne(ctx, dev, addr, who, stderr)
	if err != nil {
		return "server", res, false, err
	}
	defer done()
	res, err = serve(req)
	return "server", res, true, err
}
