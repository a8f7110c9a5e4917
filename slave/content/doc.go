// Package content is the slave's document input stream: it takes a fetched
// response body once from the network, keeps it so that every processor
// (link extraction, storage, WARC writing, ...) can read it again, decodes
// HTML to UTF-8 and checksums the content.
//
// # Document input stream
//
// ReadBody reads a body in chunks into a Body, after the "document input
// stream" of the classic crawler design: a body of at most
// BodyOptions.MemLimit bytes (64 KiB by default) stays in memory, a larger
// one is spilled to a temporary file, so that the memory a body holds stays
// about MemLimit whatever its size. BodyOptions.MaxBytes caps the bytes kept:
// ReadBody reads at most MaxBytes+1 bytes, so a longer body is detected
// (Truncated) without being read further. The caller passes a reader that
// already decompresses (net/http does so for gzip), so a decompression bomb
// stops at the cap.
//
// While reading, ReadBody computes the 64-bit xxhash of the kept bytes (the
// crawler's content checksum, Checksum64 computes the same over a slice) and
// their SHA-1 (for WARC payload digests), so nobody reads the body again just
// to hash it. Each NewReader is an independent reader from offset 0; readers
// may be used concurrently. Close removes the temporary file.
//
// # Character encodings
//
// DecodeHTML returns a UTF-8 reader of an HTML body, and DetectHTML decides
// which encoding a document is in. The order follows the WHATWG HTML
// "encoding sniffing algorithm" as golang.org/x/net/html/charset implements
// it (charset.DetermineEncoding), with two additions, marked below:
//
//  1. a byte order mark (UTF-8, UTF-16LE, UTF-16BE): it wins even over the
//     HTTP header, as in browsers and DetermineEncoding;
//  2. the charset parameter of the HTTP Content-Type header, when it names
//     an encoding (charset.Lookup: WHATWG labels, so "gb2312" is GBK,
//     "iso-8859-1" is windows-1252, ...);
//  3. the first <meta charset> or <meta http-equiv="Content-Type">
//     declaration, found by DetermineEncoding's prescan (restated here, as
//     x/net does not export it), which uses the x/net/html tokenizer rather
//     than the byte-level WHATWG prescan (see conformance_test.go for where
//     the two disagree). Addition: DetermineEncoding reads the first 1024
//     bytes, as the standard suggests for the prescan; DetectHTML reads all
//     of the prefix it is given (DecodeHTML gives SniffLen = 16 KiB), which
//     is what browsers end up doing, since a <meta> their parser meets later
//     makes them decode the page again ("change the encoding");
//  4. sniffing, over the prefix: UTF-8 when it holds non-ASCII bytes and is
//     valid UTF-8 (DetermineEncoding does so over 1024 bytes). Addition:
//     otherwise, when it holds non-ASCII bytes, a small frequency-based
//     detector for the East Asian multi-byte encodings (GBK, Big5,
//     Shift_JIS, EUC-JP, EUC-KR), which scores each decoding by how many of
//     the most frequent Chinese, Japanese and Korean characters it yields.
//     Browsers guess the same way (the standard allows "frequency analysis"
//     at this step); without it an undeclared GBK page would be read as
//     windows-1252;
//  5. the default, windows-1252.
//
// As the standard requires, a document labelled "gbk" (or "gb2312") is
// decoded with the GB18030 decoder, which reads GBK and also GB18030's
// four-byte sequences, and a byte order mark is not part of the text.
package content
