package collyslave

import (
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/storage"
)

// What colly keeps private and a distributed crawl must see or change:
// its OnRequest and OnError callback lists (taken over, so that a Visit
// from a callback does not run the OnRequest callbacks of a request that
// will be made on another slave, and a redirect the frontier follows is
// not an error), and, read only, the settings no public field shows (the
// storage, LimitRules, a transport or redirect handler of its own, the
// cookie jar, the request timeout). Everything here is checked against
// the colly module this package is built with (go.mod: colly v2.3.0;
// internals_test.go): a colly that keeps them otherwise makes New fail
// with an error naming the field, never a crash or a silent miss.

// internals are a collector's private fields, found by name.
type internals struct {
	onRequest *[]colly.RequestCallback
	onError   *[]colly.ErrorCallback
	store     reflect.Value // storage.Storage
	redirect  reflect.Value // func(*http.Request, []*http.Request) error
	limits    reflect.Value // []*colly.LimitRule
	client    reflect.Value // http.Client
}

// errColly says that this colly keeps its state where this package does
// not look for it.
func errColly(field string) error {
	return fmt.Errorf("collyslave: this colly version has no field %s as github.com/gocolly/colly/v2 v2.3 has: build with the colly version of redcrawl's go.mod", field)
}

func inspect(c *colly.Collector) (*internals, error) {
	v := reflect.ValueOf(c).Elem()
	field := func(name string, kind reflect.Kind) (reflect.Value, error) {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != kind {
			return reflect.Value{}, errColly("Collector." + name)
		}
		return f, nil
	}
	in := &internals{}
	req, err := field("requestCallbacks", reflect.Slice)
	if err != nil || req.Type() != reflect.TypeFor[[]colly.RequestCallback]() {
		return nil, errColly("Collector.requestCallbacks")
	}
	in.onRequest = (*[]colly.RequestCallback)(unsafe.Pointer(req.UnsafeAddr()))
	errs, err := field("errorCallbacks", reflect.Slice)
	if err != nil || errs.Type() != reflect.TypeFor[[]colly.ErrorCallback]() {
		return nil, errColly("Collector.errorCallbacks")
	}
	in.onError = (*[]colly.ErrorCallback)(unsafe.Pointer(errs.UnsafeAddr()))
	if in.store, err = field("store", reflect.Interface); err != nil {
		return nil, err
	}
	if in.redirect, err = field("redirectHandler", reflect.Func); err != nil {
		return nil, err
	}
	backend, err := field("backend", reflect.Pointer)
	if err != nil || backend.IsNil() {
		return nil, errColly("Collector.backend")
	}
	b := backend.Elem()
	if in.limits = b.FieldByName("LimitRules"); in.limits.Kind() != reflect.Slice {
		return nil, errColly("httpBackend.LimitRules")
	}
	if cl := b.FieldByName("Client"); cl.Kind() != reflect.Pointer || cl.IsNil() || cl.Type().Elem().Name() != "Client" {
		return nil, errColly("httpBackend.Client")
	} else {
		in.client = cl.Elem()
	}
	return in, nil
}

// customStorage reports a storage other than colly's in-memory default
// (SetStorage).
func (in *internals) customStorage() bool {
	return in.store.IsNil() || in.store.Elem().Type() != reflect.TypeFor[*storage.InMemoryStorage]()
}

// limitRules is the number of LimitRules (Limit, Limits).
func (in *internals) limitRules() int { return in.limits.Len() }

// redirectHandler reports a redirect handler (SetRedirectHandler).
func (in *internals) redirectHandler() bool { return !in.redirect.IsNil() }

// transport reports a transport of the collector's own (WithTransport,
// SetProxy, SetProxyFunc, Appengine).
func (in *internals) transport() bool { return !in.client.FieldByName("Transport").IsNil() }

// jar reports a cookie jar (colly's default; DisableCookies removes it).
func (in *internals) jar() bool { return !in.client.FieldByName("Jar").IsNil() }

// timeout is the HTTP client's timeout (SetRequestTimeout; colly's
// default is 10 s).
func (in *internals) timeout() time.Duration {
	return time.Duration(in.client.FieldByName("Timeout").Int())
}
