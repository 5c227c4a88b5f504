"""Per-service fixtures for the conformance suite: each Spec serves a history of numbered items in the real API's
shape (pagination, rate-limit and error answers as the service documents them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from collector.testing import Spec
from collector.testing.conformance import UNREADABLE_SIGNALS, query

from helpers import T0

BASE = datetime(2025, 1, 1, tzinfo=UTC)
RESET = T0 + timedelta(minutes=20)  # the reset time rate-limit answers give


def at(n: int) -> datetime:
    return BASE + timedelta(minutes=n)  # a larger number is a newer item


def iso(n: int) -> str:
    return at(n).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(n: int) -> int:
    return int(at(n).timestamp())


def token_start(value: str | None) -> int:
    return int(value[1:]) if value else 0


def gh_link(url: str, page: int, more: bool) -> dict:
    return {"Link": f'<{url}?per_page=100&page={page + 1}>; rel="next"'} if more else {}


def gh_quota(remaining=4999, reset=RESET) -> dict:
    return {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": str(remaining),
        "x-ratelimit-reset": str(int(reset.timestamp())),
    }


class GitHub(Spec):
    service, url, page_size = "github", "https://api.github.test/user/starred", 100

    def render(self, numbers, next_start, url):
        body = [
            {
                "starred_at": iso(n),
                "repo": {
                    "id": n,
                    "full_name": f"o/r{n}",
                    "html_url": f"https://github.com/o/r{n}",
                    "description": f"repo {n}",
                    "created_at": iso(0),
                    "owner": {"login": "o", "html_url": "https://github.com/o"},
                },
            }
            for n in numbers
        ]
        page = int(query(url).get("page", 1))
        return 200, {**gh_quota(), **gh_link(self.url, page, next_start is not None)}, body

    def rate_limited(self):
        return 403, gh_quota(0), {"message": "API rate limit exceeded for user ID 1."}, RESET

    def unauthorized(self):
        return 401, {}, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}


class Gist(GitHub):
    service, url = "gist", "https://api.github.test/gists/starred"

    def render(self, numbers, next_start, url):
        body = [
            {
                "id": f"g{n:x}",
                "html_url": f"https://gist.github.com/g{n:x}",
                "description": None if n % 2 else f"gist {n}",
                "created_at": iso(n),
                "updated_at": iso(n),
                "files": {f"f{n}.py": {"filename": f"f{n}.py"}},
                "owner": {"login": "o", "html_url": "https://github.com/o", "avatar_url": "https://a.test/o"},
            }
            for n in numbers
        ]
        page = int(query(url).get("page", 1))
        return 200, {**gh_quota(), **gh_link(self.url, page, next_start is not None)}, body


class StackOverflow(Spec):
    service, url, page_size = "stackoverflow", "https://api.stackexchange.com/2.3/me/favorites", 100
    settings = {"STACKEXCHANGE_KEY": "se-app-key"}
    next_field, next_values, refused_cursor = "has_more", UNREADABLE_SIGNALS, None

    def render(self, numbers, next_start, url):
        items = [
            {
                "question_id": n,
                "link": f"https://stackoverflow.com/questions/{n}/q",
                "title": f"How to &quot;{n}&quot;?",
                "tags": ["python"],
                "creation_date": epoch(n),
                "owner": {
                    "display_name": "Jane",
                    "link": "https://stackoverflow.com/users/1/jane",
                    "profile_image": "https://i.sstatic.net/a.png",
                },
            }
            for n in numbers
        ]
        return (
            200,
            {},
            {"items": items, "has_more": next_start is not None, "quota_max": 10000, "quota_remaining": 9000},
        )

    def with_next(self, answer, value):
        status, headers, body = answer
        return status, headers, {**body, "has_more": value}

    def error_answer(self, message):
        return 400, {}, {"error_id": 400, "error_name": "bad_parameter", "error_message": message}

    def rate_limited(self):
        body = {
            "error_id": 502,
            "error_name": "throttle_violation",
            "error_message": "too many requests from this IP, more requests available in 120 seconds",
        }
        return 400, {}, body, T0 + timedelta(seconds=120)

    def unauthorized(self):
        return (
            400,
            {},
            {"error_id": 402, "error_name": "invalid_access_token", "error_message": "access_token is invalid"},
        )


class Mastodon(Spec):
    service, url, page_size = "mastodon", "https://mastodon.test/api/v1/favourites", 40
    network = {"instanceUrl": "https://mastodon.test"}
    next_field = "max_id"
    next_values = (None, "x" * 3000, "")  # no max_id in the next link, one too long to keep, an empty one
    refused_cursor = "m" * 2049

    def start(self, q):
        return token_start(q.get("max_id"))

    def render(self, numbers, next_start, url):
        body = [
            {
                "id": str(n),
                "created_at": iso(n),
                "uri": f"https://x.social/users/a/statuses/{n}",
                "url": f"https://x.social/@a/{n}",
                "content": f"<p>post {n}</p>",
                "spoiler_text": "",
                "account": {
                    "id": "1",
                    "acct": "a@x.social",
                    "display_name": "A",
                    "url": "https://x.social/@a",
                    "avatar": "https://x.social/av.png",
                },
            }
            for n in numbers
        ]
        links = [f'<https://mastodon.test/api/v1/favourites?min_id=p{numbers[0] if numbers else 0}>; rel="prev"']
        if next_start is not None:
            links.insert(0, f'<https://mastodon.test/api/v1/favourites?max_id=m{next_start}>; rel="next"')
        return (
            200,
            {
                "Link": ", ".join(links),
                "X-RateLimit-Limit": "300",
                "X-RateLimit-Remaining": "250",
                "X-RateLimit-Reset": RESET.isoformat(),
            },
            body,
        )

    def with_next(self, answer, value):
        status, headers, body = answer
        query = "" if value is None else f"max_id={value}&"
        return (
            status,
            {**headers, "Link": f'<https://mastodon.test/api/v1/favourites?{query}limit=40>; rel="next"'},
            body,
        )

    def error_answer(self, message):
        return 400, {}, {"error": message}

    def rate_limited(self):
        return (
            429,
            {
                "X-RateLimit-Limit": "300",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": RESET.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            },
            {"error": "Too many requests"},
            RESET,
        )

    def unauthorized(self):
        return 401, {}, {"error": "The access token is invalid"}


class Reddit(Spec):
    service, url, page_size = "reddit", "https://oauth.reddit.com/user/ann/saved", 100
    network = {"username": "ann"}
    next_field = "data.after"
    settings = {"REDDIT_CLIENT_ID": "reddit-client", "REDDIT_CLIENT_SECRET": "reddit-secret"}
    refresh_url = "https://www.reddit.com/api/v1/access_token"

    def start(self, q):
        return token_start(q.get("after"))

    def render(self, numbers, next_start, url):
        children = []
        for n in numbers:
            if n % 3:
                children.append(
                    {
                        "kind": "t3",
                        "data": {
                            "name": f"t3_{n}",
                            "title": f"Link {n}",
                            "url": "https://e.test",
                            "permalink": f"/r/p/comments/{n}/x/",
                            "selftext": "",
                            "author": "bob",
                            "created_utc": float(epoch(n)),
                        },
                    }
                )
            else:
                children.append(
                    {
                        "kind": "t1",
                        "data": {
                            "name": f"t1_{n}",
                            "body": f"comment {n}",
                            "link_title": "T",
                            "permalink": f"/r/p/comments/1/x/{n}/",
                            "author": "bob",
                            "created_utc": float(epoch(n)),
                        },
                    }
                )
        after = f"a{next_start}" if next_start is not None else None
        return (
            200,
            {"X-Ratelimit-Used": "3", "X-Ratelimit-Remaining": "97", "X-Ratelimit-Reset": "400"},
            {"kind": "Listing", "data": {"after": after, "before": None, "children": children}},
        )

    def with_next(self, answer, value):
        status, headers, body = answer
        return status, headers, {**body, "data": {**body["data"], "after": value}}

    def error_answer(self, message):
        return 400, {}, {"message": message, "error": 400}

    def rate_limited(self):
        return (
            429,
            {"X-Ratelimit-Remaining": "0", "X-Ratelimit-Used": "100", "X-Ratelimit-Reset": "300"},
            {"message": "Too Many Requests", "error": 429},
            T0 + timedelta(seconds=300),
        )

    def unauthorized(self):
        return 401, {}, {"message": "Unauthorized", "error": 401}


class Bluesky(Spec):
    service, url, page_size = "bluesky", "https://pds.bsky.test/xrpc/app.bsky.feed.getActorLikes", 100
    network = {"did": "did:plc:abc", "pdsUrl": "https://pds.bsky.test"}
    next_field = "cursor"
    refresh_url = "https://pds.bsky.test/xrpc/com.atproto.server.refreshSession"

    def start(self, q):
        return token_start(q.get("cursor"))

    def render(self, numbers, next_start, url):
        feed = [
            {
                "post": {
                    "uri": f"at://did:plc:x/app.bsky.feed.post/r{n}",
                    "cid": "bafy",
                    "author": {
                        "did": "did:plc:x",
                        "handle": "alice.bsky.social",
                        "displayName": "Alice",
                        "avatar": "https://cdn.bsky.app/a",
                    },
                    "record": {"$type": "app.bsky.feed.post", "text": f"hello {n}", "createdAt": iso(n)},
                }
            }
            for n in numbers
        ]
        body = {"feed": feed, **({"cursor": f"c{next_start}"} if next_start is not None else {})}
        return (
            200,
            {
                "RateLimit-Limit": "3000",
                "RateLimit-Remaining": "2990",
                "RateLimit-Reset": str(int(RESET.timestamp())),
                "RateLimit-Policy": "3000;w=300",
            },
            body,
        )

    def with_next(self, answer, value):
        status, headers, body = answer
        return status, headers, {**body, "cursor": value}

    def error_answer(self, message):
        return 400, {}, {"error": "InvalidRequest", "message": message}

    def rate_limited(self):
        return (
            429,
            {"RateLimit-Limit": "3000", "RateLimit-Remaining": "0", "RateLimit-Reset": str(int(RESET.timestamp()))},
            {"error": "RateLimitExceeded", "message": "Rate Limit Exceeded"},
            RESET,
        )

    def unauthorized(self):
        return 401, {}, {"error": "AuthenticationRequired", "message": "Invalid identifier or password"}

    def expired(self):
        return 400, {}, {"error": "ExpiredToken", "message": "Token has expired"}

    def refreshed(self):
        return {
            "accessJwt": "new-access-token-0001",
            "refreshJwt": "new-refresh-token-0001",
            "handle": "alice.bsky.social",
            "did": "did:plc:abc",
        }


class Twitter(Spec):
    service, url, page_size = "twitter", "https://api.x.com/2/users/2244994945/liked_tweets", 100
    network = {"serviceUserId": "2244994945"}
    next_field = "meta.next_token"
    settings = {"TWITTER_CLIENT_ID": "x-client"}
    refresh_url = "https://api.x.com/2/oauth2/token"

    def start(self, q):
        return token_start(q.get("pagination_token"))

    def render(self, numbers, next_start, url):
        meta = {"result_count": len(numbers), **({"next_token": f"t{next_start}"} if next_start is not None else {})}
        body = {
            "data": [
                {"id": str(10**18 + n), "text": f"post {n}", "author_id": "7", "created_at": iso(n)} for n in numbers
            ],
            "includes": {
                "users": [{"id": "7", "name": "Dev", "username": "dev", "profile_image_url": "https://p.test/a"}]
            },
            "meta": meta,
        }
        if not numbers:
            body = {"meta": {"result_count": 0}}
        return (
            200,
            {
                "x-rate-limit-limit": "75",
                "x-rate-limit-remaining": "70",
                "x-rate-limit-reset": str(int(RESET.timestamp())),
            },
            body,
        )

    def with_next(self, answer, value):
        status, headers, body = answer
        return status, headers, {**body, "meta": {**body["meta"], "next_token": value}}

    def error_answer(self, message):
        return 400, {}, {"title": "Invalid Request", "type": "about:blank", "status": 400, "detail": message}

    def rate_limited(self):
        return (
            429,
            {
                "x-rate-limit-limit": "75",
                "x-rate-limit-remaining": "0",
                "x-rate-limit-reset": str(int(RESET.timestamp())),
            },
            {"title": "Too Many Requests", "status": 429},
            RESET,
        )

    def unauthorized(self):
        return 401, {}, {"title": "Unauthorized", "type": "about:blank", "status": 401, "detail": "Unauthorized"}


class YouTube(Spec):
    service, url, page_size = "youtube", "https://www.googleapis.com/youtube/v3/videos", 50
    next_field = "nextPageToken"
    settings = {"YOUTUBE_CLIENT_ID": "yt-client", "YOUTUBE_CLIENT_SECRET": "yt-secret"}
    refresh_url = "https://oauth2.googleapis.com/token"

    def start(self, q):
        return token_start(q.get("pageToken"))

    def render(self, numbers, next_start, url):
        items = [
            {
                "kind": "youtube#video",
                "etag": "e",
                "id": f"v{n:010d}",
                "snippet": {
                    "publishedAt": iso(n),
                    "channelId": "UC1",
                    "title": f"Video {n}",
                    "description": "...",
                    "channelTitle": "Chan",
                    "thumbnails": {"default": {"url": "https://i.ytimg.com/x.jpg"}},
                },
            }
            for n in numbers
        ]
        body = {
            "kind": "youtube#videoListResponse",
            "etag": "abc",
            "items": items,
            "pageInfo": {"totalResults": 999, "resultsPerPage": 50},
        }
        if next_start is not None:
            body["nextPageToken"] = f"p{next_start}"
        return 200, {}, body

    def with_next(self, answer, value):
        status, headers, body = answer
        return status, headers, {**body, "nextPageToken": value}

    def error_answer(self, message):
        return 400, {}, {"error": {"code": 400, "message": message, "errors": [{"reason": "badRequest"}]}}

    def rate_limited(self):
        from connectors.youtube import next_pacific_midnight

        body = {
            "error": {
                "code": 403,
                "message": "quota",
                "errors": [{"reason": "quotaExceeded", "domain": "youtube.quota"}],
            }
        }
        return 403, {}, body, next_pacific_midnight(T0)

    def unauthorized(self):
        return (
            401,
            {},
            {
                "error": {
                    "code": 401,
                    "message": "Request had invalid authentication credentials.",
                    "errors": [{"reason": "authError"}],
                }
            },
        )


class Vimeo(Spec):
    service, url, page_size = "vimeo", "https://api.vimeo.com/me/likes", 100
    next_field, next_values, refused_cursor = "paging.next", UNREADABLE_SIGNALS, None

    def render(self, numbers, next_start, url):
        page = int(query(url).get("page", 1))
        data = [
            {
                "uri": f"/videos/{n}",
                "link": f"https://vimeo.com/{n}",
                "name": f"Film {n}",
                "description": "...",
                "created_time": at(n).isoformat(),
                "user": {
                    "name": "Bob",
                    "link": "https://vimeo.com/bob",
                    "pictures": {"sizes": [{"link": "https://i.vimeocdn.com/p_75"}]},
                },
            }
            for n in numbers
        ]
        paging = {"next": f"/me/likes?page={page + 1}" if next_start is not None else None, "previous": None}
        return (
            200,
            {"X-RateLimit-Limit": "250", "X-RateLimit-Remaining": "240", "X-RateLimit-Reset": RESET.isoformat()},
            {"total": 999, "page": page, "per_page": 100, "paging": paging, "data": data},
        )

    def with_next(self, answer, value):
        status, headers, body = answer
        return status, headers, {**body, "paging": {**body["paging"], "next": value}}

    def error_answer(self, message):
        return 400, {}, {"error": message, "developer_message": message}

    def rate_limited(self):
        return (
            429,
            {
                "X-RateLimit-Limit": "250",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": RESET.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
            },
            {"error": "Too many requests"},
            RESET,
        )

    def unauthorized(self):
        return (
            401,
            {},
            {
                "error": "You must provide a valid authenticated access token.",
                "developer_message": "The token is invalid",
            },
        )


class Tumblr(Spec):
    service, url, page_size = "tumblr", "https://api.tumblr.com/v2/user/likes", 20
    next_field = "response._links.next.query_params.before"
    ends_on_empty_page = True  # /user/likes has no documented "more" flag: walk `before` until empty
    settings = {"TUMBLR_CONSUMER_KEY": "tumblr-key", "TUMBLR_CONSUMER_SECRET": "tumblr-secret"}
    refresh_url = "https://api.tumblr.com/v2/oauth2/token"

    def start(self, q):
        return token_start(q.get("before"))

    def render(self, numbers, next_start, url):
        posts = [
            {
                "id": 10**15 + n,
                "id_string": str(10**15 + n),
                "blog_name": "staff",
                "blog": {"name": "staff", "url": "https://staff.tumblr.com/"},
                "post_url": f"https://staff.tumblr.com/post/{n}/slug",
                "type": "text",
                "summary": f"Post {n}",
                "timestamp": epoch(n),
                "liked_timestamp": epoch(n) + 60,
            }
            for n in numbers
        ]
        response = {"liked_count": 999, "liked_posts": posts}
        if next_start is not None:
            response["_links"] = {
                "next": {
                    "href": f"/v2/user/likes?before=b{next_start}",
                    "method": "GET",
                    "query_params": {"before": f"b{next_start}"},
                }
            }
        return 200, {}, {"meta": {"status": 200, "msg": "OK"}, "response": response}

    def with_next(self, answer, value):
        status, headers, body = answer
        links = {"next": {"href": "/v2/user/likes", "method": "GET", "query_params": {"before": value}}}
        return status, headers, {**body, "response": {**body["response"], "_links": links}}

    def error_answer(self, message):
        return 400, {}, {"meta": {"status": 400, "msg": message}, "response": [], "errors": [{"detail": message}]}

    def unusable_entry(self, entry):
        return {"liked_timestamp": entry["liked_timestamp"]}  # a post of no kind the collector keeps: no id, no URL

    def rate_limited(self):
        return 429, {}, {"meta": {"status": 429, "msg": "Limit Exceeded"}, "response": []}, T0 + timedelta(seconds=60)

    def unauthorized(self):
        return 401, {}, {"meta": {"status": 401, "msg": "Unauthorized"}, "response": []}


class TumblrOAuth1(Tumblr):
    """The same service with an OAuth 1.0a network: requests are signed, never carry a Bearer token."""

    network = {"accessTokenSecret": "tumblr-token-secret-01"}
    refresh_url = None


class Flickr(Spec):
    service, url, page_size = "flickr", "https://api.flickr.com/services/rest/", 100
    network = {"accessTokenSecret": "flickr-token-secret-01"}
    next_field, next_values, refused_cursor = "photos.pages", ({"n": 2}, 1.5, True, "two", [2], None), None
    settings = {"FLICKR_API_KEY": "flickr-key", "FLICKR_API_SECRET": "flickr-secret"}

    def render(self, numbers, next_start, url):
        page = int(query(url).get("page", 1))
        photos = [
            {
                "id": str(5 * 10**9 + n),
                "owner": "12345678@N00",
                "secret": "abc",
                "server": "65535",
                "title": f"Photo {n}",
                "ownername": "Ann",
                "iconserver": "1",
                "iconfarm": 1,
                "dateupload": str(epoch(n)),
                "date_faved": str(epoch(n) + 60),
                "description": {"_content": "..."},
            }
            for n in numbers
        ]
        pages = page + 1 if next_start is not None else page
        return (
            200,
            {},
            {"photos": {"page": page, "pages": pages, "perpage": 100, "total": 999, "photo": photos}, "stat": "ok"},
        )

    def with_next(self, answer, value):
        status, headers, body = answer
        return status, headers, {**body, "photos": {**body["photos"], "pages": value}}

    def error_answer(self, message):
        return 200, {}, {"stat": "fail", "code": 1, "message": message}

    def rate_limited(self):
        return (
            429,
            {"Retry-After": "3600"},
            {"stat": "fail", "code": 0, "message": "Too many requests"},
            T0 + timedelta(seconds=3600),
        )

    def unauthorized(self):
        return 200, {}, {"stat": "fail", "code": 98, "message": "Invalid auth token"}


class Spotify(Spec):
    service, url, page_size = "spotify", "https://api.spotify.com/v1/me/tracks", 50
    next_field, next_values, refused_cursor = "next", UNREADABLE_SIGNALS, None
    settings = {"SPOTIFY_CLIENT_ID": "sp-client", "SPOTIFY_CLIENT_SECRET": "sp-secret"}
    refresh_url = "https://accounts.spotify.com/api/token"

    def start(self, q):
        return int(q.get("offset", 0))

    def render(self, numbers, next_start, url):
        items = [
            {
                "added_at": iso(n),
                "track": {
                    "id": f"t{n:021d}",
                    "name": f"Song {n}",
                    "external_urls": {"spotify": f"https://open.spotify.com/track/t{n}"},
                    "artists": [{"name": "Artist", "external_urls": {"spotify": "https://open.spotify.com/artist/1"}}],
                    "album": {"images": [{"url": "https://i.scdn.co/image/x"}]},
                },
            }
            for n in numbers
        ]
        nxt = f"https://api.spotify.com/v1/me/tracks?offset={next_start}&limit=50" if next_start is not None else None
        return 200, {}, {"limit": 50, "offset": 0, "total": 999, "next": nxt, "items": items}

    def with_next(self, answer, value):
        status, headers, body = answer
        return status, headers, {**body, "next": value}

    def error_answer(self, message):
        return 400, {}, {"error": {"status": 400, "message": message}}

    def rate_limited(self):
        return (
            429,
            {"Retry-After": "30"},
            {"error": {"status": 429, "message": "API rate limit exceeded"}},
            T0 + timedelta(seconds=30),
        )

    def unauthorized(self):
        return 401, {}, {"error": {"status": 401, "message": "Invalid access token"}}

    def expired(self):
        return 401, {}, {"error": {"status": 401, "message": "The access token expired"}}


class Dribbble(Spec):
    service, url, page_size = "dribbble", "https://api.dribbble.com/v2/user/likes", 100

    def render(self, numbers, next_start, url):
        page = int(query(url).get("page", 1))
        body = [
            {
                "id": n,
                "created_at": iso(n),
                "shot": {
                    "id": 400000 + n,
                    "title": f"Shot {n}",
                    "description": "<p>sketch</p>",
                    "html_url": f"https://dribbble.com/shots/{400000 + n}",
                    "published_at": iso(n),
                    "user": {
                        "name": "Dan",
                        "html_url": "https://dribbble.com/dan",
                        "avatar_url": "https://cdn.dribbble.com/a.png",
                    },
                },
            }
            for n in numbers
        ]
        headers = {
            "X-RateLimit-Limit": "60",
            "X-RateLimit-Remaining": "50",
            "X-RateLimit-Reset": str(int(RESET.timestamp())),
        }
        if next_start is not None:
            headers["Link"] = f'<{self.url}?page={page + 1}&per_page=100>; rel="next"'
        return 200, headers, body

    def error_answer(self, message):
        return 400, {}, {"message": message}

    def rate_limited(self):
        return (
            429,
            {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(RESET.timestamp()))},
            {"message": "API rate limit exceeded"},
            RESET,
        )

    def unauthorized(self):
        return 401, {}, {"message": "Bad credentials."}


class Facebook(Spec):
    service, url, page_size = "facebook", "https://graph.facebook.com/v25.0/me/likes", 100
    next_field = "paging.cursors.after"

    def start(self, q):
        return token_start(q.get("after"))

    def render(self, numbers, next_start, url):
        data = [
            {
                "id": str(155111347875779 + n),
                "name": f"Page {n}",
                "created_time": at(n).strftime("%Y-%m-%dT%H:%M:%S+0000"),
            }
            for n in numbers
        ]
        paging = {"cursors": {"before": "Nzc0", "after": f"a{next_start}" if next_start is not None else "end"}}
        if next_start is not None:
            paging["next"] = f"{self.url}?after=a{next_start}"
        return (
            200,
            {"X-App-Usage": json.dumps({"call_count": 5, "total_cputime": 1, "total_time": 2})},
            {"data": data, "paging": paging},
        )

    def with_next(self, answer, value):
        status, headers, body = answer
        paging = {**body["paging"], "cursors": {**body["paging"]["cursors"], "after": value}}
        return status, headers, {**body, "paging": paging}

    def error_answer(self, message):
        return 400, {}, {"error": {"message": message, "type": "OAuthException", "code": 190}}

    def rate_limited(self):
        from helpers import settings_interval

        return (
            400,
            {},
            {"error": {"message": "Application request limit reached", "type": "OAuthException", "code": 4}},
            T0 + settings_interval("rate_limit_interval"),
        )

    def unauthorized(self):
        return (
            400,
            {},
            {
                "error": {
                    "message": "Error validating access token: Session has expired",
                    "type": "OAuthException",
                    "code": 190,
                    "error_subcode": 463,
                }
            },
        )


SPECS = [
    GitHub(),
    Gist(),
    StackOverflow(),
    Mastodon(),
    Reddit(),
    Bluesky(),
    Twitter(),
    YouTube(),
    Vimeo(),
    Tumblr(),
    TumblrOAuth1(),
    Flickr(),
    Spotify(),
    Dribbble(),
    Facebook(),
]
