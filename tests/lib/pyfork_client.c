/* pyfork_client.c - the client side of tests/lib/pyfork.py, in C.
 *
 * `pyfork-client ARGS...` stands where `/usr/bin/python3 ARGS...` would:
 * a program whose text names torch or numpy runs as a fork of the server
 * (pyfork.py --serve SOCKET, reached through $TPC_PY_SOCK), any other
 * program runs in /usr/bin/python3 itself. It is pyfork.py's own client
 * (same rules, same messages, same exit statuses) without the 40 ms a
 * Python interpreter takes to start on the test machines: the suite runs a
 * few thousand `$PY ...` checks.
 *
 * The request: a 4-byte little-endian length sent with the client's fds 0,
 * 1 and 2 (SCM_RIGHTS), then a Python literal the server reads with
 * ast.literal_eval: {"argv": [...], "code": None or "...", "cwd": "...",
 * "env": {...}}. The reply: the fork's pid (4 bytes), then its exit status
 * (a 4-byte int). A string that is not UTF-8 (the literal must decode) and
 * any failure before the request is sent run /usr/bin/python3 instead. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3"

extern char **environ;

static pid_t child = -1;

/* exec python3 with ARGS (argv[1..]); `code` replaces a "-" program read from stdin */
static void run_python(int argc, char **argv, const char *code)
{
	char **a = calloc((size_t)argc + 3, sizeof(*a));
	int k = 0;
	if (!a)
		_exit(1);
	a[k++] = PYTHON;
	if (code) {
		a[k++] = "-c";
		a[k++] = (char *)code;
		for (int i = 2; i < argc; i++)
			a[k++] = argv[i];
	} else {
		for (int i = 1; i < argc; i++)
			a[k++] = argv[i];
	}
	a[k] = NULL;
	execv(PYTHON, a);
	perror("pyfork-client: " PYTHON);
	_exit(127);
}

typedef struct {
	char *p;
	size_t n, cap;
	bool bad; /* out of memory or a string that is not UTF-8 */
} buf;

static void put(buf *b, const char *s, size_t n)
{
	if (b->bad)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t c = b->cap ? b->cap : 4096;
		while (c < b->n + n + 1)
			c *= 2;
		char *q = realloc(b->p, c);
		if (!q) {
			b->bad = true;
			return;
		}
		b->p = q, b->cap = c;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void puts_(buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static bool utf8_ok(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		if (!k || i + k > n)
			return false;
		for (size_t j = 1; j < k; j++)
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
		i += k;
	}
	return true;
}

/* a Python string literal of s[0..n) */
static void put_str(buf *b, const char *s, size_t n)
{
	if (!utf8_ok((const unsigned char *)s, n)) {
		b->bad = true;
		return;
	}
	put(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c;
			put(b, esc, 2);
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\x%02x", c);
			put(b, esc, 4);
		} else {
			put(b, (const char *)&c, 1);
		}
	}
	put(b, "\"", 1);
}

static char *read_all(FILE *f, size_t *len)
{
	buf b = {0};
	char chunk[65536];
	size_t k;
	while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
		put(&b, chunk, k);
	if (ferror(f) || b.bad) {
		free(b.p);
		return NULL;
	}
	put(&b, "", 0);
	if (b.bad)
		return NULL;
	b.p[b.n] = 0;
	*len = b.n;
	return b.p ? b.p : strdup("");
}

static bool names_torch(const char *t, size_t n)
{
	return memmem(t, n, "torch", 5) || memmem(t, n, "numpy", 5);
}

static int recv_exact(int fd, void *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t k = recv(fd, (char *)p + got, n - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int main(int argc, char **argv)
{
	const char *sock = getenv("TPC_PY_SOCK");
	const char *a1 = argc > 1 ? argv[1] : NULL;
	size_t l1 = a1 ? strlen(a1) : 0;
	bool dash = a1 && !strcmp(a1, "-"), dashc = a1 && !strcmp(a1, "-c");
	if (!sock || !*sock || !a1 || !(dash || dashc || (l1 > 3 && !strcmp(a1 + l1 - 3, ".py"))) || (dashc && argc < 3))
		run_python(argc, argv, NULL);
	/* the program's text: -c's code, the script's file, or all of stdin */
	char *text = NULL;
	size_t tlen = 0;
	if (dashc) {
		text = argv[2], tlen = strlen(text);
	} else {
		FILE *f = dash ? stdin : fopen(a1, "rb");
		if (f)
			text = read_all(f, &tlen);
		if (f && !dash)
			fclose(f);
		if (!text && dash) /* stdin could not be read: python3 would fail the same way */
			run_python(argc, argv, NULL);
	}
	const char *code = dash ? text : NULL;
	if (dash && memchr(text, 0, tlen)) /* no -c with a NUL byte: let python3 refuse it */
		code = NULL;
	if (!text || !names_torch(text, tlen))
		run_python(argc, argv, code);

	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || strlen(sock) >= sizeof(sa.sun_path))
		run_python(argc, argv, code);
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		run_python(argc, argv, code);

	buf m = {0};
	char cwd[8192];
	if (!getcwd(cwd, sizeof(cwd)))
		run_python(argc, argv, code);
	puts_(&m, "{\"argv\": [");
	for (int i = 1; i < argc; i++) {
		if (i > 1)
			puts_(&m, ", ");
		put_str(&m, argv[i], strlen(argv[i]));
	}
	puts_(&m, "], \"code\": ");
	if (dash)
		put_str(&m, text, tlen);
	else
		puts_(&m, "None");
	puts_(&m, ", \"cwd\": ");
	put_str(&m, cwd, strlen(cwd));
	puts_(&m, ", \"env\": {");
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		if (e != environ)
			puts_(&m, ", ");
		put_str(&m, *e, (size_t)(eq - *e));
		puts_(&m, ": ");
		put_str(&m, eq + 1, strlen(eq + 1));
	}
	puts_(&m, "}}");
	if (m.bad || m.n > UINT32_MAX)
		run_python(argc, argv, code);

	/* the length, with fds 0, 1 and 2 */
	uint8_t hdr[4] = {(uint8_t)m.n, (uint8_t)(m.n >> 8), (uint8_t)(m.n >> 16), (uint8_t)(m.n >> 24)};
	int fds[3] = {0, 1, 2};
	char ctl[CMSG_SPACE(sizeof(fds))];
	memset(ctl, 0, sizeof(ctl));
	struct iovec iov = {.iov_base = hdr, .iov_len = 4};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != 4)
		run_python(argc, argv, code);
	for (size_t off = 0; off < m.n;) {
		ssize_t k = send(fd, m.p + off, m.n - off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			fputs("pyfork: the server did not start the program\n", stderr);
			return 1;
		}
		off += (size_t)k;
	}
	uint8_t b[4];
	if (recv_exact(fd, b, 4)) {
		fputs("pyfork: the server did not start the program\n", stderr);
		return 1;
	}
	child = (pid_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
	struct sigaction sa2 = {.sa_handler = forward};
	sigemptyset(&sa2.sa_mask);
	sigaction(SIGINT, &sa2, NULL);
	sigaction(SIGTERM, &sa2, NULL);
	sigaction(SIGHUP, &sa2, NULL);
	if (recv_exact(fd, b, 4)) {
		fputs("pyfork: the program ended without a status (killed?)\n", stderr);
		return 1;
	}
	int32_t st = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
	return st;
}
