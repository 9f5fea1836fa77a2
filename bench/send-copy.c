/*
 * bench/send-copy.c - what the kernel alone charges a sender for a body
 * sent from a buffer (write(), as nginx sends any generated answer)
 * against the same bytes sent from a file (sendfile(), as the 1,000-flag
 * row's baseline sends them), with no nginx and no module, second by
 * second: whether the copy from a buffer into the socket has slow phases
 * on this machine that sendfile has not (docs/benchmarks.md, "The
 * kernel's copy in phases").
 *
 *   send-copy FILE [SECONDS]
 *
 * One TCP connection over 127.0.0.1 (the port the kernel picks); this
 * thread, pinned to CPU 0, sends FILE's bytes as whole messages, one
 * second with write() from a buffer holding them, the next with
 * sendfile() from FILE (in the page cache after the first second), in
 * turn for SECONDS pairs (30); a thread pinned to CPU 1 reads and
 * discards, as wrk does.  For each second: the sender's CPU µs a
 * message (its own thread's CPU clock).  Output: one line a pair
 * ("write µs, sendfile µs"), then the medians, the seconds over 1.3 x
 * their side's median, and the median of the pairs' ratios sendfile /
 * write.
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int  reader_fd;

static void
pin(int cpu)
{
    cpu_set_t  set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    /* a machine with one CPU: unpinned */
    (void) pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *
reader(void *arg)
{
    static char  buf[1 << 20];

    (void) arg;
    pin(1);
    while (read(reader_fd, buf, sizeof(buf)) > 0) {
        /* discarded */
    }
    return NULL;
}

static double
thread_cpu_us(void)
{
    struct timespec  t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double
now_s(void)
{
    struct timespec  t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}

static double
median(const double *v, int n)
{
    double  *s = malloc(n * sizeof(double));
    double   m;

    memcpy(s, v, n * sizeof(double));
    qsort(s, n, sizeof(double), cmp_double);
    m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

/* one message of len bytes: 0, or -1 with errno */
static int
send_one(int s, int fd, const char *buf, size_t len, int use_sendfile)
{
    size_t   done = 0;
    off_t    off = 0;
    ssize_t  n;

    while (done < len) {
        n = use_sendfile ? sendfile(s, fd, &off, len - done)
                         : write(s, buf + done, len - done);
        if (n <= 0) {
            return -1;
        }
        done += n;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    int                 fd, lfd, s, pairs, k, slow[2] = { 0, 0 };
    char               *buf;
    double             *us[2], *ratio, m[2];
    struct stat         st;
    pthread_t           t;
    socklen_t           alen;
    struct sockaddr_in  a;

    if (argc < 2) {
        fprintf(stderr, "usage: send-copy FILE [SECONDS]\n");
        return 2;
    }
    pairs = argc > 2 ? atoi(argv[2]) : 30;
    if (pairs < 1) {
        fprintf(stderr, "send-copy: SECONDS must be at least 1\n");
        return 2;
    }

    fd = open(argv[1], O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
        perror(argv[1]);
        return 1;
    }
    buf = malloc(st.st_size);
    if (buf == NULL || pread(fd, buf, st.st_size, 0) != st.st_size) {
        perror("read");
        return 1;
    }

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    alen = sizeof(a);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    s = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || s < 0
        || bind(lfd, (struct sockaddr *) &a, sizeof(a)) != 0
        || listen(lfd, 1) != 0
        || getsockname(lfd, (struct sockaddr *) &a, &alen) != 0
        || connect(s, (struct sockaddr *) &a, sizeof(a)) != 0
        || (reader_fd = accept(lfd, NULL, NULL)) < 0)
    {
        perror("loopback connection");
        return 1;
    }
    if (pthread_create(&t, NULL, reader, NULL) != 0) {
        fprintf(stderr, "send-copy: no reader thread\n");
        return 1;
    }
    pin(0);

    us[0] = malloc(pairs * sizeof(double));
    us[1] = malloc(pairs * sizeof(double));
    ratio = malloc(pairs * sizeof(double));

    printf("# %lld-byte messages, one second each way in turn: sender CPU us a message\n"
           "# write  sendfile\n", (long long) st.st_size);
    for (k = 0; k < 2 * pairs; k++) {
        int     mode = k % 2;
        long    msgs = 0;
        double  t0 = now_s(), c0 = thread_cpu_us();

        while (now_s() - t0 < 1.0) {
            if (send_one(s, fd, buf, st.st_size, mode) != 0) {
                perror(mode ? "sendfile" : "write");
                return 1;
            }
            msgs++;
        }
        us[mode][k / 2] = (thread_cpu_us() - c0) / msgs;
        if (mode) {
            ratio[k / 2] = us[1][k / 2] / us[0][k / 2];
            printf("%7.1f %9.1f\n", us[0][k / 2], us[1][k / 2]);
            fflush(stdout);
        }
    }

    shutdown(s, SHUT_WR);
    pthread_join(t, NULL);

    for (k = 0; k < 2; k++) {
        int  i;

        m[k] = median(us[k], pairs);
        for (i = 0; i < pairs; i++) {
            slow[k] += us[k][i] > 1.3 * m[k];
        }
    }
    printf("write:    median %.1f us a message, %d of %d seconds over 1.3 x it\n",
           m[0], slow[0], pairs);
    printf("sendfile: median %.1f us a message, %d of %d seconds over 1.3 x it\n",
           m[1], slow[1], pairs);
    printf("ratio sendfile / write (median of the pairs): %.3f\n",
           median(ratio, pairs));

    close(s);
    close(reader_fd);
    close(lfd);
    close(fd);
    free(ratio);
    free(us[1]);
    free(us[0]);
    free(buf);
    return 0;
}
