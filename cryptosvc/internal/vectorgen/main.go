// Command vectorgen writes the test vectors of cipherd's sealed format, one
// JSON file per case, each named after what it breaks:
//
//	go run ./cryptosvc/internal/vectorgen -out cryptosvc/testdata/vectors
//
// Every case is built from the exported API of cryptosvc (a Service over a
// MemStore holding fixed secrets, with a deterministic Config.Rand) and byte
// surgery on its output, so the files are the same on every run. A case's
// expected result is what the format says, not what the code did: the tests
// in cryptosvc (vectors_test.go) check the code against them, and check that
// running this command again reproduces the files byte for byte.
//
// A vector file holds:
//
//	name, description
//	secret_hex            version 1 of the key's secret
//	more_secrets_hex      versions 2, 3, … (optional)
//	min_decryption_version  the key's configuration (optional)
//	key_name              the key, as held by the keystore and given to Open
//	context_hex           the context given to Open
//	ciphertext_hex
//	result                "valid" or "invalid"
//	error                 for invalid vectors: auth, truncated, malformed,
//	                      unsupported, key_not_found, key_mismatch,
//	                      version_retired (the cryptosvc sentinels)
//	plaintext_hex         for valid vectors, or plaintext_sha512 for long ones
//	aead, mode, key_version  what Open reports for valid vectors
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
)

// Vector is one test vector file.
type Vector struct {
	Name                 string   `json:"name"`
	Description          string   `json:"description"`
	SecretHex            string   `json:"secret_hex"`
	MoreSecretsHex       []string `json:"more_secrets_hex,omitempty"`
	MinDecryptionVersion uint32   `json:"min_decryption_version,omitempty"`
	KeyName              string   `json:"key_name"`
	ContextHex           string   `json:"context_hex"`
	CiphertextHex        string   `json:"ciphertext_hex"`
	Result               string   `json:"result"`
	Error                string   `json:"error,omitempty"`
	PlaintextHex         *string  `json:"plaintext_hex,omitempty"`
	PlaintextSHA512      string   `json:"plaintext_sha512,omitempty"`
	AEAD                 string   `json:"aead,omitempty"`
	Mode                 string   `json:"mode,omitempty"`
	KeyVersion           uint32   `json:"key_version,omitempty"`
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("vectorgen: ")
	out := flag.String("out", "", "directory to write the vector files to (required)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cases {
		v := c()
		if seen[v.Name] {
			log.Fatalf("duplicate case %s", v.Name)
		}
		seen[v.Name] = true
		b, err := json.MarshalIndent(v, "", "\t")
		if err != nil {
			log.Fatalf("%s: %v", v.Name, err)
		}
		b = append(b, '\n')
		if err := os.WriteFile(filepath.Join(*out, v.Name+".json"), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("wrote %d vectors to %s\n", len(seen), *out)
}
