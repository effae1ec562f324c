/* A Web Worker for pages opened from files (file://), where Chromium refuses to start one.
 *
 * Material's search runs lunr in a Worker. Its offline plugin (mkdocs.yml) inlines the index into
 * search/search_index.js for file://, and would load this shim from unpkg.com ("iframe-worker")
 * unless a polyfill of that name is listed: this is ours, so that no request leaves the files.
 * Over http(s) it does nothing and the browser's own Worker runs.
 *
 * The worker's script runs in a hidden iframe of the page's origin: its global `postMessage`
 * answers the page, and the page's messages arrive as "message" events on the iframe's window,
 * which is all Material's search worker uses (plus `importScripts` for languages other than
 * English, given here as a promise, which that worker awaits). */
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class IFrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.onerror = null;
      this.pending = [];
      this.loaded = false;

      const iframe = document.createElement("iframe");
      iframe.setAttribute("aria-hidden", "true");
      iframe.tabIndex = -1;
      iframe.style.display = "none";
      (document.body || document.documentElement).appendChild(iframe);
      this.iframe = iframe;

      const scope = iframe.contentWindow;
      scope.postMessage = (data) => {
        setTimeout(() => this.deliver(data));
      };
      scope.importScripts = (...urls) =>
        urls.reduce(
          (done, next) => done.then(() => this.load(next)),
          Promise.resolve(),
        );
      this.load(String(url)).then(
        () => {
          this.loaded = true;
          for (const data of this.pending.splice(0)) this.send(data);
        },
        () => this.fail(`could not load ${url}`),
      );
    }

    load(url) {
      const scope = this.iframe.contentWindow;
      return new Promise((resolve, reject) => {
        const script = scope.document.createElement("script");
        script.src = url;
        script.onload = resolve;
        script.onerror = reject;
        scope.document.head.appendChild(script);
      });
    }

    postMessage(data) {
      if (this.loaded) this.send(data);
      else this.pending.push(data);
    }

    send(data) {
      const scope = this.iframe.contentWindow;
      const copy = structuredClone(data);
      setTimeout(() => scope.dispatchEvent(new scope.MessageEvent("message", { data: copy })));
    }

    deliver(data) {
      const event = new MessageEvent("message", { data: structuredClone(data) });
      if (typeof this.onmessage === "function") this.onmessage(event);
      this.dispatchEvent(event);
    }

    fail(message) {
      const event = new ErrorEvent("error", { message });
      if (typeof this.onerror === "function") this.onerror(event);
      this.dispatchEvent(event);
    }

    terminate() {
      this.iframe.remove();
    }
  }

  window.IFrameWorker = IFrameWorker;
  window.Worker = IFrameWorker;
})();
