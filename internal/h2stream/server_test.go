package h2stream

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// sendMethod is the test service's one method: a server-streaming call whose request, a query string,
// says what the server answers (see testService.send).
const sendMethod = "/test.Stream/Send"

// testService is a gRPC service of grpc-go's own server, the other end the client is tested against.
type testService struct {
	// ended receives the error of every stream the server saw end while it waited (block).
	ended chan error
}

// send answers the query of its request: count messages (1 by default) of the sizes listed (each filled
// with its index), interval apart, then the status code and msg; block sends one message and waits for
// the stream's end; echo sends the request's metadata back, one "key=value" message each.
func (s *testService) send(_ any, ss grpc.ServerStream) error {
	var req wrapperspb.StringValue
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}

	q, err := url.ParseQuery(req.GetValue())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}

	switch {
	case q.Has("block"):
		if err = ss.SendMsg(wrapperspb.Bytes(nil)); err != nil {
			return err
		}

		<-ss.Context().Done()
		s.ended <- ss.Context().Err()

		return ss.Context().Err()
	case q.Has("echo"):
		md, _ := metadata.FromIncomingContext(ss.Context())
		_, deadline := ss.Context().Deadline()

		for _, k := range []string{"node", "runtime", ":authority", "user-agent", "authorization"} {
			if err = ss.SendMsg(wrapperspb.Bytes([]byte(k + "=" + strings.Join(md.Get(k), ",")))); err != nil {
				return err
			}
		}

		return ss.SendMsg(wrapperspb.Bytes([]byte("deadline=" + strconv.FormatBool(deadline))))
	}

	sizes := []int{8}
	if q.Has("sizes") {
		sizes = sizes[:0]

		for v := range strings.SplitSeq(q.Get("sizes"), ",") {
			n, _ := strconv.Atoi(v)
			sizes = append(sizes, n)
		}
	}

	count := 1
	if q.Has("count") {
		count, _ = strconv.Atoi(q.Get("count"))
	}

	interval, _ := time.ParseDuration(q.Get("interval"))

	for i := range count {
		if i > 0 && interval > 0 {
			time.Sleep(interval)
		}

		if err = ss.SendMsg(wrapperspb.Bytes(message(i, sizes[i%len(sizes)]))); err != nil {
			return err
		}
	}

	if code, _ := strconv.Atoi(q.Get("code")); code != 0 {
		return status.Error(codes.Code(code), q.Get("msg"))
	}

	return nil
}

// message is the test server's message i, of size bytes.
func message(i, size int) []byte {
	return []byte(strings.Repeat(string(rune('a'+i%26)), size))
}

// testServer is a grpc-go server of testService on a TCP listener of the loopback.
type testServer struct {
	*testService

	srv  *grpc.Server
	addr string
}

// startServer serves testService on addr ("" for any port of the loopback), with TLS when cert is set.
func startServer(t testing.TB, addr string, cert *tls.Certificate, opts ...grpc.ServerOption) *testServer {
	t.Helper()

	if addr == "" {
		addr = "127.0.0.1:0"
	}

	lis, err := net.Listen("tcp", addr)
	require.NoError(t, err)

	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})))
	}

	s := &testServer{testService: &testService{ended: make(chan error, 100)}, srv: grpc.NewServer(opts...), addr: lis.Addr().String()}
	s.srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Stream",
		HandlerType: (*any)(nil),
		Streams:     []grpc.StreamDesc{{StreamName: "Send", ServerStreams: true, Handler: s.send}},
	}, struct{}{})

	served := make(chan struct{})

	go func() {
		defer close(served)

		_ = s.srv.Serve(lis)
	}()

	t.Cleanup(func() {
		s.srv.Stop()
		<-served
	})

	return s
}

// selfSigned is a certificate of the loopback's address, and a pool of it.
func selfSigned(t testing.TB) (*tls.Certificate, *x509.CertPool) {
	t.Helper()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}

	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)

	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)

	pool := x509.NewCertPool()
	pool.AddCert(leaf)

	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// newTestClient is a client of the server at addr.
func newTestClient(t testing.TB, opts Options, addr string) *Client {
	t.Helper()

	opts.Endpoints = []Endpoint{{Address: addr}}
	if opts.UserAgent == "" {
		opts.UserAgent = "h2stream-test"
	}

	c, err := New(opts)
	require.NoError(t, err)

	t.Cleanup(func() { require.NoError(t, c.Close()) })

	return c
}

// call opens a call of the test service with query.
func call(ctx context.Context, c *Client, method, query string) (grpc.ClientStream, error) {
	s, err := c.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return nil, err
	}

	if err = s.SendMsg(wrapperspb.String(query)); err != nil {
		return nil, err
	}

	return s, s.CloseSend()
}

// recv receives a message of the test service.
func recv(s grpc.ClientStream) ([]byte, error) {
	var msg wrapperspb.BytesValue

	err := s.RecvMsg(&msg)

	return msg.GetValue(), err
}
