module github.com/cipherd/cipherd

go 1.26.0

require (
	github.com/klauspost/cpuid/v2 v2.4.2
	go.uber.org/zap v1.28.0
	golang.org/x/crypto v0.59.0
)

require (
	go.uber.org/multierr v1.10.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
