// Clang thread-safety analysis attributes (-Wthread-safety; scripts/thread_safety.sh builds the
// tree with it). Other compilers see nothing. Annotate a lock's data with GUARDED_BY(mu), a
// function that expects a lock held with REQUIRES(mu), one that takes it itself with EXCLUDES(mu).
// libstdc++'s std::mutex carries no annotations: annotated code uses common/mutex.h.
#pragma once

#if defined(__clang__)
#define SEDIMENT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SEDIMENT_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) SEDIMENT_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY SEDIMENT_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) SEDIMENT_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SEDIMENT_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) SEDIMENT_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) SEDIMENT_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) SEDIMENT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SEDIMENT_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) SEDIMENT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SEDIMENT_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SEDIMENT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SEDIMENT_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) SEDIMENT_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) SEDIMENT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) SEDIMENT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) SEDIMENT_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) SEDIMENT_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS SEDIMENT_THREAD_ANNOTATION(no_thread_safety_analysis)
