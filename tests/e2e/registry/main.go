// Command registry is the e2e's stand-in for a container registry: a
// read-only HTTP server of the OCI distribution API's pull endpoints over
// OCI image layout directories (what tests/e2e/lib.sh's oci_archive packs).
// The runtimes are configured to use it as the mirror of the registries
// the test images claim to come from, so that a CRI PullImage (critest
// pulls its busybox image this way) resolves and fetches offline.
//
//	registry -addr 127.0.0.1:0 -port-file F LAYOUT...
//
// Served: GET and HEAD of /v2/, /v2/<repo>/manifests/<tag or digest> and
// /v2/<repo>/blobs/<digest>. A tag resolves to the manifest whose
// io.containerd.image.name annotation ends in "/<repo>:<tag>" (or is
// "<repo>:<tag>"), in any layout's index.json. Only the standard library
// is used, so it builds without the module proxy.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

type store struct {
	layouts []string
	// tags maps "repo:tag" (the image name without its registry host) and
	// the full image name to the manifest's descriptor.
	tags map[string]descriptor
	// types remembers the media type of every manifest named in an index.
	types map[string]string
}

func load(layouts []string) (*store, error) {
	s := &store{layouts: layouts, tags: map[string]descriptor{}, types: map[string]string{}}
	for _, dir := range layouts {
		raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
		if err != nil {
			return nil, err
		}
		var idx struct {
			Manifests []descriptor `json:"manifests"`
		}
		if err := json.Unmarshal(raw, &idx); err != nil {
			return nil, fmt.Errorf("%s/index.json: %w", dir, err)
		}
		for _, m := range idx.Manifests {
			s.types[m.Digest] = m.MediaType
			name := m.Annotations["io.containerd.image.name"]
			if name == "" {
				continue
			}
			s.tags[name] = m
			if i := strings.Index(name, "/"); i > 0 && strings.ContainsAny(name[:i], ".:") {
				s.tags[name[i+1:]] = m
			}
		}
	}
	return s, nil
}

// blob finds a blob by digest in any layout.
func (s *store) blob(digest string) (string, bool) {
	algo, hex, ok := strings.Cut(digest, ":")
	if !ok || algo != "sha256" || len(hex) != 64 || strings.ContainsAny(hex, "/.") {
		return "", false
	}
	for _, dir := range s.layouts {
		p := filepath.Join(dir, "blobs", algo, hex)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

func (s *store) serveFile(w http.ResponseWriter, r *http.Request, path, digest, mediaType string) {
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "blob unreadable", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		http.Error(w, "blob unreadable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Content-Length", fmt.Sprint(st.Size()))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = f.WriteTo(w)
	}
}

func notFound(w http.ResponseWriter, code, what string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]string{{"code": code, "message": what}},
	})
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log.Printf("%s %s", r.Method, r.URL.Path)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "read-only registry", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	path := strings.TrimPrefix(r.URL.Path, "/v2/")
	if path == r.URL.Path {
		http.NotFound(w, r)
		return
	}
	if path == "" {
		w.WriteHeader(http.StatusOK)
		return
	}
	if i := strings.LastIndex(path, "/manifests/"); i > 0 {
		repo, ref := path[:i], path[i+len("/manifests/"):]
		digest, mediaType := ref, s.types[ref]
		if !strings.HasPrefix(ref, "sha256:") {
			m, ok := s.tags[repo+":"+ref]
			if !ok {
				notFound(w, "MANIFEST_UNKNOWN", repo+":"+ref)
				return
			}
			digest, mediaType = m.Digest, m.MediaType
		}
		p, ok := s.blob(digest)
		if !ok || mediaType == "" {
			notFound(w, "MANIFEST_UNKNOWN", ref)
			return
		}
		s.serveFile(w, r, p, digest, mediaType)
		return
	}
	if i := strings.LastIndex(path, "/blobs/"); i > 0 {
		digest := path[i+len("/blobs/"):]
		p, ok := s.blob(digest)
		if !ok {
			notFound(w, "BLOB_UNKNOWN", digest)
			return
		}
		s.serveFile(w, r, p, digest, "application/octet-stream")
		return
	}
	http.NotFound(w, r)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	portFile := flag.String("port-file", "", "file to write the chosen port to once listening")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: registry [-addr A] [-port-file F] LAYOUT_DIR...")
	}
	s, err := load(flag.Args())
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *portFile != "" {
		port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		tmp := *portFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(port+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *portFile); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("serving %d images on %s", len(s.tags), ln.Addr())
	log.Fatal(http.Serve(ln, s))
}
