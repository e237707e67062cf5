// Package cmatose speaks the protocols of two librdmacm examples
// (rdma-core v44.0, librdmacm/examples) over a goverbs device whose
// Dial/Listen connect through rdma_cm's peer (the IB CM over RoCE, MPA
// over iWARP), so that a goverbs program and the real tools are each
// other's client and server:
//
//   - ucmatose (cmatose.c): one RC connection (its -c 1) on port 7471.
//     Both sides post Count receives of Size bytes before connecting;
//     once connected the server SENDs Count messages, waits for their
//     completions, then waits for Count receives, and disconnects. The
//     client waits for its Count receives, answers with Count SENDs and
//     waits for the server's disconnect. ucmatose sends its buffers as
//     malloc left them and checks nothing but the completions, so a
//     goverbs side checks each message's length and count, and the
//     bytes only against another goverbs side (Config.CheckData).
//   - rdma_server / rdma_client (rdma_server.c, rdma_client.c): one
//     16-byte SEND each way through rdma_create_ep's QP. The client posts
//     its receive, connects and SENDs; the server, its receive posted
//     before rdma_accept, answers once the client's message is in; the
//     server disconnects after its SEND completes. Both messages are
//     static arrays, 16 zero bytes, and a goverbs side checks every one.
package cmatose
