// Package hashslot computes Redis Cluster hash slots, so that tools and
// tests can tell which node holds a crawl's shard without asking Redis.
package hashslot

import "strings"

// Of is Redis Cluster's slot of a key: CRC16 (XMODEM) of its hash tag (the
// part between the first { and the next }, when not empty) or of the whole
// key, mod 16384.
//
// CRC16 is linear: the tags {name}, {name:1}, {name:2}, … of a crawl's
// shards have correlated slots whatever the name, so some placements of a
// crawl's shards on a cluster's nodes never happen by chance. Move the
// slots (redis-cli --cluster reshard) to balance a crawl's shards.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
