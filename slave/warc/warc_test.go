package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ---- An independent reader: shares no code with the writer. ----

// record is one parsed WARC record.
type record struct {
	file    string
	offset  int64 // compressed offset of its gzip member
	length  int64 // compressed length of its gzip member
	version string
	fields  map[string]string
	order   []string // field names in order
	block   []byte
}

// countingReader counts the bytes consumed; it is an io.ByteReader so that
// gzip/flate read from it directly and never past the end of a member.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// readFile parses every gzip member of path as exactly one record.
func readFile(t testing.TB, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr := &countingReader{r: bufio.NewReader(f)}
	var recs []record
	zr := new(gzip.Reader)
	for {
		start := cr.n
		if err := zr.Reset(cr); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: gzip member at %d: %v", path, start, err)
		}
		zr.Multistream(false)
		data, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: gzip member at %d: %v", path, start, err)
		}
		rec := parseRecord(t, fmt.Sprintf("%s@%d", path, start), data)
		rec.file, rec.offset, rec.length = filepath.Base(path), start, cr.n-start
		recs = append(recs, rec)
	}
	return recs
}

// parseRecord parses data as exactly one record followed by CRLF CRLF.
func parseRecord(t testing.TB, where string, data []byte) record {
	t.Helper()
	rec := record{fields: map[string]string{}}
	r := bufio.NewReader(bytes.NewReader(data))
	line := func() string {
		s, err := r.ReadString('\n')
		if err != nil || !strings.HasSuffix(s, "\r\n") {
			t.Fatalf("%s: header line %q not CRLF-terminated (%v)", where, s, err)
		}
		return strings.TrimSuffix(s, "\r\n")
	}
	rec.version = line()
	for {
		l := line()
		if l == "" {
			break
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("%s: bad header line %q", where, l)
		}
		v = strings.TrimSpace(v)
		if _, dup := rec.fields[k]; dup {
			t.Errorf("%s: duplicate field %s", where, k)
		}
		rec.fields[k] = v
		rec.order = append(rec.order, k)
	}
	cl, err := strconv.ParseInt(rec.fields["Content-Length"], 10, 64)
	if err != nil {
		t.Fatalf("%s: Content-Length %q: %v", where, rec.fields["Content-Length"], err)
	}
	rec.block = make([]byte, cl)
	if _, err := io.ReadFull(r, rec.block); err != nil {
		t.Fatalf("%s: block shorter than Content-Length %d: %v", where, cl, err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "\r\n\r\n" {
		t.Errorf("%s: record trailer is %q, want CRLF CRLF and nothing more", where, rest)
	}
	return rec
}

func sha1b32(b []byte) string {
	s := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
}

var (
	fileNameRE = regexp.MustCompile(`^([A-Za-z0-9._-]+)-(\d{14})-(\d{5})-([0-9a-f]+)\.warc\.gz$`)
	uuidRE     = regexp.MustCompile(`^<urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}>$`)
	dateRE     = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)
)

// archive is everything read back from a directory.
type archive struct {
	files []string // base names, sorted
	recs  []record // in file then offset order
	byID  map[string]record
}

// readDir reads every file of dir, checks each record against the WARC 1.1
// rules the writer promises, and returns them.
func readDir(t testing.TB, dir string) archive {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := archive{byID: map[string]record{}}
	for _, e := range ents {
		if !fileNameRE.MatchString(e.Name()) {
			t.Errorf("unexpected file %q in %s", e.Name(), dir)
			continue
		}
		a.files = append(a.files, e.Name())
	}
	for _, name := range a.files {
		recs := readFile(t, filepath.Join(dir, name))
		if len(recs) == 0 || recs[0].fields["WARC-Type"] != "warcinfo" {
			t.Fatalf("%s does not start with a warcinfo record", name)
		}
		info := recs[0]
		checkWarcinfo(t, name, info)
		for i, rec := range recs {
			where := fmt.Sprintf("%s record %d", name, i)
			checkRecord(t, where, rec)
			if i > 0 {
				if rec.fields["WARC-Type"] == "warcinfo" {
					t.Errorf("%s: second warcinfo in the file", where)
				}
				if got := rec.fields["WARC-Warcinfo-ID"]; got != info.fields["WARC-Record-ID"] {
					t.Errorf("%s: WARC-Warcinfo-ID %s, want %s", where, got, info.fields["WARC-Record-ID"])
				}
			}
			id := rec.fields["WARC-Record-ID"]
			if _, dup := a.byID[id]; dup {
				t.Errorf("%s: duplicate WARC-Record-ID %s", where, id)
			}
			a.byID[id] = rec
			a.recs = append(a.recs, rec)
		}
	}
	// Every request names a response of the same file that precedes it
	// immediately.
	for i, rec := range a.recs {
		if rec.fields["WARC-Type"] != "request" {
			continue
		}
		to := rec.fields["WARC-Concurrent-To"]
		resp, ok := a.byID[to]
		if !ok || resp.fields["WARC-Type"] != "response" {
			t.Errorf("request %s: WARC-Concurrent-To %s is not a response", rec.fields["WARC-Record-ID"], to)
			continue
		}
		if prev := a.recs[i-1]; prev.fields["WARC-Record-ID"] != to {
			t.Errorf("request %s does not follow its response", rec.fields["WARC-Record-ID"])
		}
		if resp.fields["WARC-Target-URI"] != rec.fields["WARC-Target-URI"] || resp.fields["WARC-Date"] != rec.fields["WARC-Date"] {
			t.Errorf("request %s: target/date differ from its response", rec.fields["WARC-Record-ID"])
		}
	}
	return a
}

func checkWarcinfo(t testing.TB, name string, info record) {
	t.Helper()
	if got := info.fields["Content-Type"]; got != "application/warc-fields" {
		t.Errorf("%s warcinfo: Content-Type %q", name, got)
	}
	if got := info.fields["WARC-Filename"]; got != name {
		t.Errorf("%s warcinfo: WARC-Filename %q", name, got)
	}
	kv := map[string]string{}
	for _, l := range strings.SplitAfter(string(info.block), "\r\n") {
		if l == "" {
			continue
		}
		if !strings.HasSuffix(l, "\r\n") {
			t.Errorf("%s warcinfo: line %q not CRLF-terminated", name, l)
		}
		k, v, _ := strings.Cut(strings.TrimSuffix(l, "\r\n"), ": ")
		kv[k] = v
	}
	for k, want := range map[string]string{
		"software":   "redcrawl-test/1.0",
		"format":     "WARC File Format 1.1",
		"conformsTo": "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
		"operator":   "ops@example.org",
	} {
		if kv[k] != want {
			t.Errorf("%s warcinfo: %s = %q, want %q", name, k, kv[k], want)
		}
	}
	if kv["hostname"] == "" {
		t.Errorf("%s warcinfo: no hostname", name)
	}
}

func checkRecord(t testing.TB, where string, rec record) {
	t.Helper()
	if rec.version != "WARC/1.1" {
		t.Errorf("%s: version line %q", where, rec.version)
	}
	for _, k := range []string{"WARC-Type", "WARC-Record-ID", "WARC-Date", "Content-Length", "WARC-Block-Digest", "Content-Type"} {
		if rec.fields[k] == "" {
			t.Errorf("%s: missing %s", where, k)
		}
	}
	if !uuidRE.MatchString(rec.fields["WARC-Record-ID"]) {
		t.Errorf("%s: WARC-Record-ID %q is not a v4 urn:uuid", where, rec.fields["WARC-Record-ID"])
	}
	if !dateRE.MatchString(rec.fields["WARC-Date"]) {
		t.Errorf("%s: WARC-Date %q", where, rec.fields["WARC-Date"])
	}
	if got, want := rec.fields["WARC-Block-Digest"], sha1b32(rec.block); got != want {
		t.Errorf("%s: WARC-Block-Digest %s, recomputed %s", where, got, want)
	}
	switch typ := rec.fields["WARC-Type"]; typ {
	case "response", "request":
		if rec.fields["WARC-Target-URI"] == "" {
			t.Errorf("%s: missing WARC-Target-URI", where)
		}
		if rec.fields["WARC-Warcinfo-ID"] == "" {
			t.Errorf("%s: missing WARC-Warcinfo-ID", where)
		}
		if got, want := rec.fields["Content-Type"], "application/http;msgtype="+typ; got != want {
			t.Errorf("%s: Content-Type %q, want %q", where, got, want)
		}
		i := bytes.Index(rec.block, []byte("\r\n\r\n"))
		if i < 0 {
			t.Errorf("%s: HTTP message without CRLF CRLF", where)
			return
		}
		if typ == "response" {
			if got, want := rec.fields["WARC-Payload-Digest"], sha1b32(rec.block[i+4:]); got != want {
				t.Errorf("%s: WARC-Payload-Digest %s, recomputed %s", where, got, want)
			}
		} else if rec.fields["WARC-Concurrent-To"] == "" {
			t.Errorf("%s: request without WARC-Concurrent-To", where)
		}
	case "warcinfo":
	default:
		t.Errorf("%s: unexpected WARC-Type %q", where, typ)
	}
}

// readAt decompresses exactly one gzip member at loc and parses it.
func readAt(t testing.TB, dir string, loc Location) record {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, loc.File))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sr := io.NewSectionReader(f, loc.Offset, loc.Length)
	cr := &countingReader{r: bufio.NewReader(sr)}
	zr, err := gzip.NewReader(cr)
	if err != nil {
		t.Fatalf("%+v: %v", loc, err)
	}
	zr.Multistream(false)
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%+v: %v", loc, err)
	}
	if cr.n != loc.Length {
		t.Errorf("%+v: member is %d bytes, Length says %d", loc, cr.n, loc.Length)
	}
	return parseRecord(t, fmt.Sprintf("%+v", loc), data)
}

// ---- Helpers to make exchanges. ----

func newTestWriter(t testing.TB, dir string, max int64) *Writer {
	t.Helper()
	w, err := NewWriter(Options{
		Dir: dir, Prefix: "slave 7/a", MaxFileBytes: max,
		Software: "redcrawl-test/1.0", Operator: "ops@example.org",
		Now: func() time.Time { return time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("X", 3600)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

type testExchange struct {
	name string
	uri  string
	ip   string
	body []byte
	size int64 // BodySize; -2 means len(body)
}

func (te testExchange) exchange() Exchange {
	size := te.size
	if size == -2 {
		size = int64(len(te.body))
	}
	return Exchange{
		TargetURI: te.uri,
		Date:      time.Date(2025, 1, 2, 3, 4, 5, 678, time.UTC),
		IP:        te.ip,
		Request: []byte("GET " + te.uri + " HTTP/1.1\r\nHost: example.org\r\n" +
			"User-Agent: redcrawl\r\n\r\n"),
		ResponseHeader: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: " +
			strconv.Itoa(len(te.body)) + "\r\n\r\n"),
		Body:     bytes.NewReader(te.body),
		BodySize: size,
	}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// htmlish returns n bytes of HTML-like text: markup, a few hundred words,
// numbers, so that it compresses about as well as a real page.
func htmlish(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	tags := []string{"<p>", "</p>\n", "<div class=\"item\">", "</div>\n", "<li>", "</li>", "<span>", "</span>", "<br>\n"}
	var b bytes.Buffer
	for b.Len() < n {
		switch r.IntN(10) {
		case 0:
			b.WriteString(tags[r.IntN(len(tags))])
		case 1:
			fmt.Fprintf(&b, `<a href="/articles/%d/%x">`, r.IntN(100000), r.Uint32())
		case 2:
			b.WriteString(strconv.Itoa(r.IntN(1000000)))
		default:
			// A made-up word of 2 to 9 letters from a skewed alphabet.
			for range 2 + r.IntN(8) {
				b.WriteByte("etaoinshrdlcumwfgypbvkjxqz"[min(r.IntN(26), r.IntN(26))])
			}
		}
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

// want is what a test expects to find for one exchange. The body is
// compared through its length and digest: cmp on megabytes is slow.
type want struct {
	URI, IP, Date string
	BodyLen       int
	BodySHA1      string
}

func gotExchange(t testing.TB, resp record) want {
	t.Helper()
	i := bytes.Index(resp.block, []byte("\r\n\r\n"))
	return want{
		URI:      resp.fields["WARC-Target-URI"],
		IP:       resp.fields["WARC-IP-Address"],
		Date:     resp.fields["WARC-Date"],
		BodyLen:  len(resp.block[i+4:]),
		BodySHA1: sha1b32(resp.block[i+4:]),
	}
}

// ---- Tests. ----

func TestWriteExchangeRoundTrip(t *testing.T) {
	exchanges := []testExchange{
		{name: "text", uri: "http://example.org/", ip: "93.184.216.34", body: htmlish(1, 3000), size: -2},
		{name: "binary", uri: "http://example.org/img.png", ip: "2001:db8::1", body: randomBytes(2, 20000), size: -1},
		{name: "empty", uri: "http://example.org/empty", body: nil, size: 0},
		{name: "empty unknown size", uri: "http://example.org/empty2", body: nil, size: -1},
		{name: "5MB known size", uri: "http://example.org/big", ip: "10.0.0.1", body: randomBytes(3, 5<<20), size: -2},
		{name: "spooled to file, unknown size", uri: "http://example.org/big2", body: htmlish(4, 1<<20+1), size: -1},
		{name: "exactly 1MiB", uri: "http://example.org/mib", body: randomBytes(5, 1<<20), size: -1},
		{name: "after big", uri: "http://example.org/a?q=1&r=%20", body: htmlish(6, 100), size: -2},
		{name: "small 1", uri: "http://example.org/s1", body: htmlish(7, 10), size: -2},
		{name: "small 2", uri: "http://example.org/s2", body: htmlish(8, 10), size: -2},
		{name: "small 3", uri: "http://example.org/s3", body: randomBytes(9, 5000), size: -2},
	}
	dir := t.TempDir()
	w := newTestWriter(t, dir, 4000) // small: several files, some with many exchanges
	locs := map[string]Location{}
	for _, te := range exchanges {
		loc, err := w.WriteExchange(te.exchange())
		if err != nil {
			t.Fatalf("%s: WriteExchange: %v", te.name, err)
		}
		locs[te.name] = loc
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := w.WriteExchange(exchanges[0].exchange()); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteExchange after Close: %v, want ErrClosed", err)
	}

	a := readDir(t, dir)
	if len(a.files) < 3 {
		t.Errorf("%d files, want rotation into at least 3", len(a.files))
	}
	var gotFiles []string
	for _, p := range w.Files() {
		gotFiles = append(gotFiles, filepath.Base(p))
	}
	if diff := cmp.Diff(a.files, gotFiles); diff != "" {
		t.Errorf("Files() differs from the directory (-dir +Files):\n%s", diff)
	}
	for i, name := range a.files {
		m := fileNameRE.FindStringSubmatch(name)
		if got := []string{m[1], m[2], m[3]}; !cmp.Equal(got, []string{"slave_7_a", "20250304040607", fmt.Sprintf("%05d", i)}) {
			t.Errorf("file name %s: prefix, time, seq = %q", name, got)
		}
	}

	var nResp, nReq int
	for _, rec := range a.recs {
		switch rec.fields["WARC-Type"] {
		case "response":
			nResp++
		case "request":
			nReq++
		}
	}
	if nResp != len(exchanges) || nReq != len(exchanges) {
		t.Errorf("%d responses and %d requests, want %d of each", nResp, nReq, len(exchanges))
	}

	for _, te := range exchanges {
		loc := locs[te.name]
		rec := readAt(t, dir, loc)
		if got := rec.fields["WARC-Type"]; got != "response" {
			t.Errorf("%s: Location points at a %s record", te.name, got)
		}
		if got := rec.fields["WARC-Record-ID"]; got != loc.RecordID {
			t.Errorf("%s: Location points at %s, RecordID is %s", te.name, got, loc.RecordID)
		}
		stored, ok := a.byID[loc.RecordID]
		if !ok || stored.file != loc.File || stored.offset != loc.Offset || stored.length != loc.Length {
			t.Errorf("%s: Location %+v, reader found file %s offset %d length %d", te.name, loc, stored.file, stored.offset, stored.length)
		}
		got := gotExchange(t, rec)
		wantX := want{URI: te.uri, IP: te.ip, Date: "2025-01-02T03:04:05Z", BodyLen: len(te.body), BodySHA1: sha1b32(te.body)}
		if diff := cmp.Diff(wantX, got); diff != "" {
			t.Errorf("%s: stored exchange differs (-want +got):\n%s", te.name, diff)
		}
		// The request member starts right after the response member.
		idx := slices.IndexFunc(a.recs, func(r record) bool { return r.file == loc.File && r.offset == loc.Offset+loc.Length })
		if idx < 0 || a.recs[idx].fields["WARC-Concurrent-To"] != loc.RecordID {
			t.Errorf("%s: no request record at Offset+Length", te.name)
		}
	}
}

func TestFieldsOfResponse(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, 0)
	x := testExchange{uri: "https://example.org/p", ip: "192.0.2.1", body: []byte("hello"), size: -2}.exchange()
	loc, err := w.WriteExchange(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec := readAt(t, dir, loc)
	wantOrder := []string{"WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Target-URI", "WARC-IP-Address",
		"WARC-Warcinfo-ID", "WARC-Block-Digest", "WARC-Payload-Digest", "Content-Type", "Content-Length"}
	if diff := cmp.Diff(wantOrder, rec.order); diff != "" {
		t.Errorf("response fields (-want +got):\n%s", diff)
	}
	// sha1("hello") is aaf4c61d..., in base32 VL2MMHO4YXUKFWV63YHTWSBM3GXKSQ2N.
	if got, want := rec.fields["WARC-Payload-Digest"], "sha1:VL2MMHO4YXUKFWV63YHTWSBM3GXKSQ2N"; got != want {
		t.Errorf("WARC-Payload-Digest %s, want %s", got, want)
	}
	if got, want := rec.fields["Content-Length"], strconv.Itoa(len(x.ResponseHeader)+5); got != want {
		t.Errorf("Content-Length %s, want %s", got, want)
	}
	readDir(t, dir)
}

func TestNoFileWithoutRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	w := newTestWriter(t, dir, 0)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("Dir not created: %v", err)
	}
	if len(ents) != 0 || len(w.Files()) != 0 {
		t.Errorf("files %v, Files() %v, want none", ents, w.Files())
	}
}

func TestOpenFileUntilRotation(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, 0)
	loc, err := w.WriteExchange(testExchange{uri: "http://e/", body: []byte("x"), size: -2}.exchange())
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{loc.File + ".open"}, names); diff != "" {
		t.Errorf("directory before Close (-want +got):\n%s", diff)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	readDir(t, dir)
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(len(p), f.n)
	f.n -= n
	return n, nil
}

func TestWriteExchangeErrors(t *testing.T) {
	good := func() Exchange {
		return testExchange{uri: "http://example.org/", body: []byte("body"), size: -2}.exchange()
	}
	tests := []struct {
		name   string
		modify func(*Exchange)
		want   string
	}{
		{"empty uri", func(x *Exchange) { x.TargetURI = "" }, "empty TargetURI"},
		{"uri with CRLF", func(x *Exchange) { x.TargetURI = "http://e/\r\nWARC-Type: x" }, "control character"},
		{"uri with space", func(x *Exchange) { x.TargetURI = "http://e/a b" }, "space"},
		{"bad ip", func(x *Exchange) { x.IP = "999.1.1.1" }, "bad IP"},
		{"no status line", func(x *Exchange) { x.ResponseHeader = []byte("Content-Type: x\r\n\r\n") }, "status line"},
		{"header without CRLFCRLF", func(x *Exchange) { x.ResponseHeader = []byte("HTTP/1.1 200 OK\r\n") }, "CRLF CRLF"},
		{"header with body bytes", func(x *Exchange) { x.ResponseHeader = []byte("HTTP/1.1 200 OK\r\n\r\nxx") }, "CRLF CRLF"},
		{"request without CRLFCRLF", func(x *Exchange) { x.Request = []byte("GET / HTTP/1.1\r\n") }, "Request"},
		{"body shorter than BodySize", func(x *Exchange) { x.BodySize = 10 }, "BodySize says 10"},
		{"body longer than BodySize", func(x *Exchange) { x.BodySize = 2 }, "BodySize says 2"},
		{"bad BodySize", func(x *Exchange) { x.BodySize = -5 }, "bad BodySize"},
		{"body read error", func(x *Exchange) { x.Body, x.BodySize = &failingReader{n: 100}, -1 }, "connection reset"},
		{"big body read error", func(x *Exchange) { x.Body, x.BodySize = &failingReader{n: 3 << 20}, -1 }, "connection reset"},
	}
	dir := t.TempDir()
	w := newTestWriter(t, dir, 0)
	var locs []Location
	for _, tc := range tests {
		x := good()
		tc.modify(&x)
		if _, err := w.WriteExchange(x); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "warc: write exchange: ") {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
		// The writer stays usable and the file stays valid.
		loc, err := w.WriteExchange(good())
		if err != nil {
			t.Fatalf("%s: good exchange after a bad one: %v", tc.name, err)
		}
		locs = append(locs, loc)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a := readDir(t, dir)
	if got, want := len(a.recs), 1+2*len(tests); got != want {
		t.Errorf("%d records, want %d", got, want)
	}
	for _, loc := range locs {
		readAt(t, dir, loc)
	}
}

func TestDamagedFileIsSticky(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, 0)
	x := func() Exchange { return testExchange{uri: "http://e/", body: []byte("x"), size: -2}.exchange() }
	if _, err := w.WriteExchange(x()); err != nil {
		t.Fatal(err)
	}
	w.cur.f.Close() // the disk goes away: writing and truncating both fail
	if _, err := w.WriteExchange(x()); err == nil {
		t.Fatal("WriteExchange to a closed file succeeded")
	}
	_, err := w.WriteExchange(x())
	if err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Errorf("WriteExchange after a failed rollback: %v, want the sticky damage error", err)
	}
}

func TestNewWriterErrors(t *testing.T) {
	base := t.TempDir()
	notDir := filepath.Join(base, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opt  Options
		want string
	}{
		{"no dir", Options{}, "empty Dir"},
		{"negative max", Options{Dir: base, MaxFileBytes: -1}, "negative MaxFileBytes"},
		{"operator newline", Options{Dir: base, Operator: "a\nb"}, "Operator contains control"},
		{"software newline", Options{Dir: base, Software: "a\r"}, "Software contains control"},
		{"bad level", Options{Dir: base, CompressionLevel: 10}, "bad CompressionLevel"},
		{"dir is a file", Options{Dir: filepath.Join(notDir, "sub")}, "create dir"},
	}
	for _, tc := range tests {
		_, err := NewWriter(tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestSanitizePrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "redcrawl"},
		{"slave-1", "slave-1"},
		{"a b/c\\d:e", "a_b_c_d_e"},
		{"pi.local_2", "pi.local_2"},
		{"..", "_."},
		{"../../x", "_._.._x"},
		{".hidden", "_hidden"},
		{strings.Repeat("p", 300), strings.Repeat("p", maxPrefixLen)},
		{"bü", "b__"},
	}
	for _, tc := range tests {
		if got := sanitizePrefix(tc.in); got != tc.want {
			t.Errorf("sanitizePrefix(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestConcurrentWriters(t *testing.T) {
	defer goleak.VerifyNone(t)
	const goroutines, per = 8, 40
	dir := t.TempDir()
	w := newTestWriter(t, dir, 20000)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*per)
	for g := range goroutines {
		wg.Go(func() {
			for i := range per {
				var body []byte
				if i%2 == 0 {
					body = htmlish(uint64(g*1000+i), 500+i*37)
				} else {
					body = randomBytes(uint64(g*1000+i), 300+i*53)
				}
				uri := fmt.Sprintf("http://example.org/g%d/%d", g, i)
				x := testExchange{uri: uri, body: body, size: -1}.exchange()
				x.Body = iotestHalfReader{bytes.NewReader(body)}
				loc, err := w.WriteExchange(x)
				if err != nil {
					errs <- err
					continue
				}
				if loc.RecordID == "" {
					errs <- fmt.Errorf("%s: empty location", uri)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a := readDir(t, dir) // checks request-follows-response, digests, ids
	got := map[string]int{}
	for _, rec := range a.recs {
		if rec.fields["WARC-Type"] == "response" {
			got[rec.fields["WARC-Target-URI"]] = gotExchange(t, rec).BodyLen
		}
	}
	wantBodies := map[string]int{}
	for g := range goroutines {
		for i := range per {
			n := 500 + i*37
			if i%2 == 1 {
				n = 300 + i*53
			}
			wantBodies[fmt.Sprintf("http://example.org/g%d/%d", g, i)] = n
		}
	}
	if diff := cmp.Diff(wantBodies, got); diff != "" {
		t.Errorf("stored bodies by URI, lengths (-want +got):\n%s", diff)
	}
	if len(a.files) < 2 {
		t.Errorf("%d files, want rotation", len(a.files))
	}
}

// iotestHalfReader returns at most half of what is asked (at least one
// byte), like a slow network body.
type iotestHalfReader struct{ r io.Reader }

func (h iotestHalfReader) Read(p []byte) (int, error) {
	return h.r.Read(p[:(len(p)+1)/2])
}

func FuzzWriteExchange(f *testing.F) {
	f.Add("http://example.org/", []byte("hello"), []byte("X-A: b\r\n"), true)
	f.Add("http://e/\u00e9", []byte{}, []byte{}, false)
	f.Fuzz(func(t *testing.T, uri string, body, extraHeader []byte, known bool) {
		dir := t.TempDir()
		w, err := NewWriter(Options{Dir: dir, MaxFileBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		size := int64(-1)
		if known {
			size = int64(len(body))
		}
		x := Exchange{
			TargetURI:      uri,
			Request:        []byte("GET / HTTP/1.1\r\n\r\n"),
			ResponseHeader: append(append([]byte("HTTP/1.1 200 OK\r\n"), extraHeader...), "\r\n"...),
			Body:           bytes.NewReader(body),
			BodySize:       size,
		}
		loc, err := w.WriteExchange(x)
		if cerr := w.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			return // rejected input; nothing must be half written
		}
		rec := readAt(t, dir, loc)
		if rec.fields["WARC-Target-URI"] != uri {
			t.Errorf("WARC-Target-URI %q, want %q", rec.fields["WARC-Target-URI"], uri)
		}
		if got := rec.block[len(x.ResponseHeader):]; !bytes.Equal(got, body) {
			t.Errorf("body differs")
		}
		if got, want := rec.fields["WARC-Payload-Digest"], sha1b32(body); got != want {
			t.Errorf("WARC-Payload-Digest %s, want %s", got, want)
		}
		for _, name := range w.Files() {
			recs := readFile(t, name)
			for i, r := range recs {
				checkRecord(t, fmt.Sprintf("%s#%d", name, i), r)
			}
		}
	})
}

// BenchmarkWriteExchange writes 15 KB pages; MB/s counts body bytes.
func BenchmarkWriteExchange(b *testing.B) {
	for _, level := range []struct {
		name  string
		level int
	}{{"default", 0}, {"bestspeed", gzip.BestSpeed}} {
		b.Run(level.name, func(b *testing.B) {
			benchmarkWriteExchange(b, level.level, false)
		})
		b.Run(level.name+"-parallel", func(b *testing.B) {
			benchmarkWriteExchange(b, level.level, true)
		})
	}
}

func benchmarkWriteExchange(b *testing.B, level int, parallel bool) {
	body := htmlish(42, 15<<10)
	req := []byte("GET /page HTTP/1.1\r\nHost: example.org\r\nUser-Agent: redcrawl\r\n\r\n")
	hdr := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 15360\r\n\r\n")
	w, err := NewWriter(Options{Dir: b.TempDir(), MaxFileBytes: 64 << 20, CompressionLevel: level})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	write := func(r *bytes.Reader) error {
		r.Reset(body)
		_, err := w.WriteExchange(Exchange{
			TargetURI: "http://example.org/page", Request: req, ResponseHeader: hdr,
			Body: r, BodySize: int64(len(body)),
		})
		return err
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			var r bytes.Reader
			for pb.Next() {
				if err := write(&r); err != nil {
					b.Error(err)
					return
				}
			}
		})
		return
	}
	var r bytes.Reader
	for b.Loop() {
		if err := write(&r); err != nil {
			b.Fatal(err)
		}
	}
}
