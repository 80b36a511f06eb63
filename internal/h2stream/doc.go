// Package h2stream is a client of gRPC server-streaming calls over HTTP/2 that costs no goroutine per
// stream: one goroutine per connection reads its frames and queues each stream's data, and a stream's
// messages are received on the goroutine of its caller.
//
// grpc-go gives every client stream a goroutine of its own, which waits for the end of the stream's or the
// connection's context, and a few kilobytes of structures; the Talos source holds a watch stream of every
// machine for as long as its Node lasts, thousands of them, idle almost all the time. Here an idle stream is
// a few hundred bytes and no goroutine: its caller blocks on a channel of its own until data arrives, and its
// context's end is seen through context.AfterFunc, which starts a goroutine only when the context ends.
//
// What it reads comes from the network: no frame, header or message can make it panic, and what it holds of
// a stream is bounded by the stream's flow-control window, which it replenishes as the caller consumes.
package h2stream
