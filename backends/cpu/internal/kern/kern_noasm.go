//go:build !amd64 || purego

package kern

// haveAsm reports whether assembly variants are compiled in. Without
// them (another GOARCH, or the purego build tag) only the generic
// variant is registered.
const haveAsm = false
