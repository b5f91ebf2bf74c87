module github.com/cipherd/cipherd

go 1.26.0

require (
	github.com/klauspost/cpuid/v2 v2.4.2
	golang.org/x/crypto v0.59.0
)

require golang.org/x/sys v0.50.0 // indirect
