package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
)

// stdin is what encrypt and decrypt read (a variable for tests in-process).
var stdin io.Reader = os.Stdin

const defaultServerURL = "http://127.0.0.1:8080"

// clientFlags are the flags of every command that talks to a server.
type clientFlags struct {
	server, token, ca string
	tokenFile         string
	cert, keyFile     string // the client certificate and its key, PEM files
	withToken         bool   // send --token, --token-file, CIPHERD_TOKEN or CIPHERD_TOKEN_FILE
	insecure          bool   // health only: it sends no token
}

func (f *clientFlags) register(fs *flag.FlagSet, withToken bool) {
	def := os.Getenv("CIPHERD_URL")
	if def == "" {
		def = defaultServerURL
	}
	fs.StringVar(&f.server, "server", def, "cipherd's URL (CIPHERD_URL)")
	fs.StringVar(&f.ca, "ca", os.Getenv("CIPHERD_CA"), "PEM file of the CA that signed an https server's certificate (CIPHERD_CA)")
	fs.StringVar(&f.cert, "cert", os.Getenv("CIPHERD_CLIENT_CERT"), "PEM `file` of the client certificate (and its chain) to present to an https server, for an mTLS identity; needs --key-file (CIPHERD_CLIENT_CERT)")
	fs.StringVar(&f.keyFile, "key-file", os.Getenv("CIPHERD_CLIENT_KEY"), "PEM `file` of the private key of --cert (CIPHERD_CLIENT_KEY)")
	f.withToken = withToken
	if withToken {
		fs.StringVar(&f.token, "token", "", "bearer token (default CIPHERD_TOKEN; prefer the variable: flags show in ps)")
		fs.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token, read for each request, such as a Kubernetes projected service-account token (default CIPHERD_TOKEN_FILE)")
	}
}

// tokenOption returns how to send the bearer token: --token, --token-file,
// CIPHERD_TOKEN or CIPHERD_TOKEN_FILE, the first set; two of one kind
// (both flags, or both variables) are an error.
func (f *clientFlags) tokenOption() (client.Option, error) {
	tok, file := f.token, f.tokenFile
	what := "--token and --token-file"
	if tok == "" && file == "" {
		tok, file = os.Getenv("CIPHERD_TOKEN"), os.Getenv("CIPHERD_TOKEN_FILE")
		what = "CIPHERD_TOKEN and CIPHERD_TOKEN_FILE"
	}
	switch {
	case tok != "" && file != "":
		return nil, fmt.Errorf("%s are both set: give one", what)
	case file != "":
		return client.WithTokenFile(file), nil
	}
	return client.WithToken(tok), nil
}

func (f *clientFlags) client() (*client.Client, error) {
	var opts []client.Option
	if f.withToken {
		o, err := f.tokenOption()
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	tc, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, client.WithTLSConfig(tc))
	}
	return client.New(f.server, opts...)
}

// tlsConfig returns the TLS configuration the flags ask for (a CA, a
// client certificate, no verification), or nil for the system's defaults.
func (f *clientFlags) tlsConfig() (*tls.Config, error) {
	if f.ca == "" && f.cert == "" && f.keyFile == "" && !f.insecure {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.insecure}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", f.ca)
		}
		tc.RootCAs = pool
	}
	switch {
	case f.cert == "" && f.keyFile == "":
		return tc, nil
	case f.cert == "" || f.keyFile == "":
		return nil, errors.New("a client certificate needs both --cert and --key-file (CIPHERD_CLIENT_CERT and CIPHERD_CLIENT_KEY)")
	case !strings.HasPrefix(strings.ToLower(f.server), "https://"):
		return nil, fmt.Errorf("a client certificate is presented over TLS only: %s is not an https URL", f.server)
	}
	pair, err := tls.LoadX509KeyPair(f.cert, f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate %s: %w", f.cert, err)
	}
	// Present it whenever the server asks, even when the server's list of
	// acceptable CAs does not name its issuer (an intermediate CA, a
	// server that sends no list): Go's client would then send none, and
	// the request would go out as no one's.
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	return tc, nil
}

func runEncrypt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runCrypt(ctx, "encrypt", args, stdout, stderr)
}

func runDecrypt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runCrypt(ctx, "decrypt", args, stdout, stderr)
}

// runCrypt streams a file or standard input through the server to a file
// or standard output.
func runCrypt(ctx context.Context, op string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		if op == "decrypt" {
			fmt.Fprintf(stderr, "usage: cipherd %s [--key NAME] [-i IN] [-o OUT] [--range A-B] [--local] [--context B64 | --context-text TEXT] [--server URL]\n\n", op)
		} else {
			fmt.Fprintf(stderr, "usage: cipherd %s --key NAME [-i IN] [-o OUT] [--local] [--context B64 | --context-text TEXT] [--server URL]\n\n", op)
		}
		if op == "encrypt" {
			fmt.Fprintln(stderr, "Seals IN (default standard input) under the key, streaming through a cipherd")
			fmt.Fprintln(stderr, "server, to OUT (default standard output).")
		} else {
			fmt.Fprintln(stderr, "Opens a sealed stream from IN (default standard input) to OUT (default")
			fmt.Fprintln(stderr, "standard output). On failure it exits 1; a file named by -o is then left as")
			fmt.Fprintln(stderr, "it was, but what went to standard output must be discarded.")
			fmt.Fprintln(stderr)
			fmt.Fprintln(stderr, "The key is the one the sealed stream's header names; --key, when given, must")
			fmt.Fprintln(stderr, "name the same key (another is refused, exit 2, before anything is sent).")
			fmt.Fprintln(stderr)
			fmt.Fprintln(stderr, "--range A-B opens bytes A to B (inclusive) of the plaintext, A- from A to the")
			fmt.Fprintln(stderr, "end, as curl -r names them, of a sealed file given by -i: only its header and")
			fmt.Fprintln(stderr, "the chunks that cover the range go to the server. A range past the end ends")
			fmt.Fprintln(stderr, "there; one that starts past it fails (range_not_satisfiable).")
		}
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "The context (additional data) binds the message: decryption needs the same")
		fmt.Fprintln(stderr, "bytes. --context takes them in standard base64; --context-text takes UTF-8")
		fmt.Fprintln(stderr, "text, its bytes exactly as given (no newline added). One of the two, either")
		fmt.Fprintln(stderr, "form on either side: --context-text 'invoice 7' is --context aW52b2ljZSA3.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "--local seals or opens on this machine: the server hands out a sealing key")
		fmt.Fprintln(stderr, "(encrypt) or the key of the one message (decrypt), and the data never goes")
		fmt.Fprintln(stderr, "to it. The output is the same sealed format either way: what --local seals")
		fmt.Fprintln(stderr, "decrypts through the server, and the reverse.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "-o FILE is written to a temporary file beside it and renamed over it only")
		fmt.Fprintln(stderr, "once the whole stream succeeded; a new file gets mode 0600, a replaced one")
		fmt.Fprintln(stderr, "keeps its mode. The token is read from CIPHERD_TOKEN unless --token is given;")
		fmt.Fprintln(stderr, "--token-file or CIPHERD_TOKEN_FILE names a file read for each request instead.")
		fmt.Fprintln(stderr, "--cert and --key-file (CIPHERD_CLIENT_CERT, CIPHERD_CLIENT_KEY) present a client")
		fmt.Fprintln(stderr, "certificate to an https server, for an mTLS identity, instead of a token.")
		fmt.Fprintln(stderr, "Progress (bytes, rate, and the time left when the input's size is known)")
		fmt.Fprintln(stderr, "goes to standard error when it is a terminal.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	var cf clientFlags
	cf.register(fs, true)
	keyHelp := "key name (required), such as the default key \"default\""
	if op == "decrypt" {
		keyHelp = "key name; default: the key the input's header names"
	}
	key := fs.String("key", "", keyHelp)
	ctxB64 := fs.String("context", "", "context (additional data) as standard `base64`; decryption needs the same")
	ctxText := fs.String("context-text", "", "context (additional data) as UTF-8 `text`, instead of --context")
	inPath := fs.String("i", "-", "input `file`; - for standard input")
	outPath := fs.String("o", "-", "output `file`, replaced only on success; - for standard output")
	syncOut := fs.Bool("sync", false, "with -o FILE, write the output to stable storage (fsync) before it replaces FILE, at the disk's speed")
	progressMode := fs.String("progress", "auto", "progress on standard error: auto (when it is a terminal), always or never")
	local := fs.Bool("local", false, "seal or open on this machine, with key material from the server: the data never goes to it")
	var rangeArg *string
	if op == "decrypt" {
		rangeArg = fs.String("range", "", "decrypt only bytes `A-B` of the plaintext (inclusive; A- to the end) of the sealed file -i")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || (*key == "" && op == "encrypt") || *inPath == "" || *outPath == "" {
		fs.Usage()
		return 2
	}
	var rg cryptosvc.Range
	ranged := rangeArg != nil && *rangeArg != ""
	if ranged {
		var err error
		if rg, err = cryptosvc.ParseRange(*rangeArg); err != nil {
			fmt.Fprintf(stderr, "cipherd %s: --range is A-B (bytes A to B, inclusive) or A- (A to the end), in decimal\n", op)
			return 2
		}
	}
	var aad []byte
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["context"] && set["context-text"]:
		fmt.Fprintf(stderr, "cipherd %s: give the context once: --context (base64) or --context-text (text)\n", op)
		return 2
	case *ctxText != "":
		if !utf8.ValidString(*ctxText) {
			fmt.Fprintf(stderr, "cipherd %s: --context-text must be UTF-8 text; give other bytes in base64 with --context\n", op)
			return 2
		}
		aad = []byte(*ctxText)
	case *ctxB64 != "":
		var err error
		if aad, err = base64.StdEncoding.DecodeString(*ctxB64); err != nil {
			fmt.Fprintf(stderr, "cipherd %s: --context must be standard base64 (--context-text takes text)\n", op)
			return 2
		}
	}
	showProgress := false
	switch *progressMode {
	case "auto":
		showProgress = isTerminal(stderr)
	case "always":
		showProgress = true
	case "never":
	default:
		fmt.Fprintf(stderr, "cipherd %s: -progress must be auto, always or never\n", op)
		return 2
	}
	if op == "encrypt" && *outPath == "-" && isTerminal(stdout) {
		fmt.Fprintf(stderr, "cipherd %s: not writing a ciphertext to a terminal: use -o FILE or redirect standard output\n", op)
		return 2
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintf(stderr, "cipherd %s: %s\n", op, errText(err))
		return 2
	}
	var in io.ReadCloser
	var sealed *io.SectionReader
	size := int64(-1)
	if ranged {
		sealed, in, err = rangeSource(*inPath)
	} else {
		in, size, err = input(*inPath)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cipherd %s: %s\n", op, errText(err))
		return 1
	}
	defer in.Close()
	var head []byte // what peekKey read of in, sent before the rest
	if op == "decrypt" {
		var named string
		var hdrErr error
		if ranged {
			named, _, hdrErr = peekKey(io.NewSectionReader(sealed, 0, sealed.Size()))
		} else {
			named, head, hdrErr = peekKey(in)
		}
		if *key, err = decryptKey(*key, named, hdrErr); err != nil {
			fmt.Fprintf(stderr, "cipherd %s: %s\n", op, errText(err))
			if errors.Is(err, errKeyMismatch) {
				return 2
			}
			return 1
		}
	}
	out, err := createOutput(*outPath, stdout, *syncOut)
	if err != nil {
		fmt.Fprintf(stderr, "cipherd %s: %s\n", op, errText(err))
		return 1
	}
	var meter *progress
	if ranged {
		err = decryptRange(ctx, c, *key, sealed, rg, aad, *local, func(total int64) io.Writer {
			if showProgress {
				meter = startProgress(stderr, "cipherd "+op, total)
			}
			return meter.writer(out)
		})
	} else {
		stream := c.EncryptStream
		switch {
		case op == "decrypt" && *local:
			stream = c.DecryptStreamLocal
		case op == "decrypt":
			stream = c.DecryptStream
		case *local:
			l, err := c.NewLocalSealer(*key, client.LocalLimits{})
			if err != nil {
				fmt.Fprintf(stderr, "cipherd %s: %s\n", op, errText(err))
				return 2
			}
			stream = func(ctx context.Context, _ string, dst io.Writer, src io.Reader, aad []byte) (client.StreamInfo, error) {
				return l.EncryptStream(ctx, dst, src, aad)
			}
			if f := regularFile(in, *inPath); f != nil && size > 0 {
				// A regular file is sealed from its pages mapped into
				// memory; the meter counts what is written.
				stream = func(ctx context.Context, _ string, dst io.Writer, _ io.Reader, aad []byte) (client.StreamInfo, error) {
					return l.EncryptFile(ctx, meter.writer(dst), f, aad)
				}
			}
		}
		if showProgress {
			meter = startProgress(stderr, "cipherd "+op, size)
		}
		if size >= 0 {
			// The output is at most this long: the message sealing size
			// bytes, or the plaintext of a message of size bytes, shorter.
			out.reserve(cryptosvc.MaxSealedLen(size))
		}
		src := meter.reader(io.MultiReader(bytes.NewReader(head), in))
		if size >= 0 {
			// The client sends a source that knows its length with it, and
			// the service answers with the exact length, in large pieces.
			src = &knownLen{r: src, left: size}
		}
		_, err = stream(ctx, *key, out, src, aad)
	}
	if err == nil {
		err = out.commit()
	} else {
		out.abort()
	}
	meter.end(err == nil)
	if err != nil {
		fmt.Fprintf(stderr, "cipherd %s: %s\n", op, errText(err))
		if out.tmp != "" {
			fmt.Fprintf(stderr, "cipherd %s: %s was not written\n", op, *outPath)
		}
		return 1
	}
	return 0
}

// runHealth exits 0 when the server's /readyz answers 200: the container
// HEALTHCHECK, without curl in the image.
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, false)
	fs.BoolVar(&cf.insecure, "insecure", false, "do not verify an https server's certificate (the probe sends no token)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	quiet := fs.Bool("q", false, "print nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cipherd health: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintln(stderr, "cipherd health:", errText(err))
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		if !*quiet {
			var ce *client.Error
			if errors.As(err, &ce) {
				fmt.Fprintf(stderr, "cipherd health: not ready: %s\n", errText(err))
			} else {
				fmt.Fprintf(stderr, "cipherd health: %s unreachable: %s\n", cf.server, errText(err))
			}
		}
		return 1
	}
	if !*quiet {
		fmt.Fprintln(stdout, "ready")
	}
	return 0
}
