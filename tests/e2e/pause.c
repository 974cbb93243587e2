/* The sandbox ("pause") process of the e2e test images: sleeps until told
 * to stop and reaps what it inherits, like the upstream pause image.
 * Built statically by tests/e2e/lib.sh. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, 0, WNOHANG) > 0) {
    }
}

int main(void) {
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    signal(SIGCHLD, reap);
    for (;;)
        pause();
}
