package testsite

// The hostile hub's pages in legacy charsets (Shift_JIS, EUC-KR, GBK,
// Big5…), each declared in the header, a meta tag, or not at all.

import (
	"bytes"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// Declaration is where a page in a legacy charset declares it.
type Declaration string

// Where the pages of HostileURLs.Encodings declare their charset.
const (
	// DeclaredHeader: only in the Content-Type response header.
	DeclaredHeader Declaration = "header"
	// DeclaredMetaCharset: only in <meta charset="...">; the header says
	// "text/html".
	DeclaredMetaCharset Declaration = "meta charset"
	// DeclaredMetaHTTPEquiv: only in <meta http-equiv="Content-Type"
	// content="text/html; charset=...">.
	DeclaredMetaHTTPEquiv Declaration = "meta http-equiv"
	// DeclaredNone: nowhere; only sniffing the bytes finds the charset.
	DeclaredNone Declaration = "none"
)

// EncodedPage is a hostile page in a legacy charset. Its bytes are the
// UTF-8 Title and Text encoded in Charset, with one link whose path has
// non-ASCII characters, also encoded in Charset. A crawler that decodes the
// page to UTF-8 before extracting links requests Target; one that decodes
// it wrongly requests another URL under /hostile/enc/, which is a 404.
type EncodedPage struct {
	// URL is the page's absolute URL, ".../hostile/enc/<name>".
	URL string
	// Charset is the encoding's WHATWG name, as the page declares it:
	// "gbk", "gb18030", "big5", "shift_jis" or "euc-kr".
	Charset string
	// Declared is where the page declares Charset.
	Declared Declaration
	// Title is the page's <title> (and <h1>), in UTF-8.
	Title string
	// Text is a sentence of the page's body, in UTF-8; undeclared pages
	// repeat it, to be long enough to sniff.
	Text string
	// Target is the absolute URL of the page's only link, its path
	// percent-encoded in UTF-8, e.g. ".../hostile/enc/gbk/%E7%9B%AE%E6%A0%87";
	// it answers 200 with a small UTF-8 page.
	Target string
}

// encSpec is a page in a legacy charset.
type encSpec struct {
	name     string // path segment
	charset  string // WHATWG name, as declared
	enc      encoding.Encoding
	declared Declaration
	lang     string
	title    string
	text     string
	repeat   int    // times text is written
	target   string // the link's last path segment, non-ASCII
	body     []byte // the page, encoded
}

// targetPath is the UTF-8 path of the page's link.
func (e *encSpec) targetPath() string { return hostilePrefix + "enc/" + e.name + "/" + e.target }

// encSpecs returns the pages in legacy charsets, without their bodies.
func encSpecs() []encSpec {
	return []encSpec{
		{name: "gbk", charset: "gbk", enc: simplifiedchinese.GBK, declared: DeclaredHeader, lang: "zh-CN",
			title: "简体中文页面", text: "网络爬虫必须先把网页解码成统一码，然后才能解析其中的链接。",
			repeat: 1, target: "目标"},
		{name: "gb18030", charset: "gb18030", enc: simplifiedchinese.GB18030, declared: DeclaredMetaCharset, lang: "zh-CN",
			title: "国标扩展页面", text: "这个页面用国标扩展编码写成，包含扩展汉字𠮷，只有正确解码才能读出来。",
			repeat: 1, target: "目标𠮷"},
		{name: "big5", charset: "big5", enc: traditionalchinese.Big5, declared: DeclaredMetaHTTPEquiv, lang: "zh-TW",
			title: "繁體中文頁面", text: "網路爬蟲必須先將網頁解碼為萬國碼，然後才能解析其中的連結。",
			repeat: 1, target: "目標"},
		// "表" is 0x95 0x5C in Shift_JIS: read as ASCII, its second byte is
		// a backslash, which URL parsers take for a slash.
		{name: "sjis", charset: "shift_jis", enc: japanese.ShiftJIS, declared: DeclaredNone, lang: "ja",
			title: "日本語のページ", text: "ウェブクローラーは、リンクを解析する前に、ページを必ずユニコードに変換しなければなりません。",
			repeat: 24, target: "表示"},
		{name: "euckr", charset: "euc-kr", enc: korean.EUCKR, declared: DeclaredHeader, lang: "ko",
			title: "한국어 페이지", text: "웹 크롤러는 링크를 분석하기 전에 페이지를 유니코드로 변환해야 합니다.",
			repeat: 1, target: "목표"},
	}
}

// contentType is the Content-Type header of e's page.
func (e *encSpec) contentType() string {
	if e.declared == DeclaredHeader {
		return "text/html; charset=" + e.charset
	}
	return "text/html"
}

// render writes e's page, in UTF-8, to b.
func (e *encSpec) render(b *bytes.Buffer) {
	b.WriteString("<!DOCTYPE html>\n<html lang=\"" + e.lang + "\">\n<head>\n")
	switch e.declared {
	case DeclaredMetaCharset:
		b.WriteString("<meta charset=\"" + e.charset + "\">\n")
	case DeclaredMetaHTTPEquiv:
		b.WriteString("<meta http-equiv=\"Content-Type\" content=\"text/html; charset=" + e.charset + "\">\n")
	}
	b.WriteString("<title>" + e.title + "</title>\n</head>\n<body>\n<h1>" + e.title + "</h1>\n")
	for range e.repeat {
		b.WriteString("<p>" + e.text + "</p>\n")
	}
	b.WriteString("<p><a href=\"" + e.targetPath() + "\">" + e.target + "</a></p>\n</body>\n</html>\n")
}
