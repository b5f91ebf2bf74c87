//go:build purego

package kernels

// puregoBuild reports whether the purego build tag is set, which removes the
// assembly of the standard library, x/crypto and this package.
const puregoBuild = true
