//go:build !cgo || netgo

package netguard

// cgoResolverBuilt reports whether the net package was built with the cgo
// (libc getaddrinfo) resolver, which a Resolver with PreferGo false uses
// under GODEBUG=netdns=cgo.
const cgoResolverBuilt = false
